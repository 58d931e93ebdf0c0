package genie

import (
	"sort"

	"genie.dev/genie/internal/capi"
)

// Settings names settings of docs/configuration.md and their values:
// string for text settings, int, int64 or bool for the others. The library
// checks each name, side and bound: an unknown name, a setting of the other
// side (a server's on Options.Settings) or a value out of bounds is an
// ErrInvalidArgument naming it.
type Settings map[string]any

// applySettings sets each of settings on the configuration h by name, in
// name order (so an error names the same setting every time).
func applySettings(prefix string, h uintptr, settings Settings,
	setInt func(uintptr, string, int64) int, setString func(uintptr, string, string) int) error {
	names := make([]string, 0, len(settings))
	for name := range settings {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := checkNames(prefix, name); err != nil {
			return err
		}
		var err error
		switch v := settings[name].(type) {
		case string:
			if err = checkNames(prefix+"_set_string", v); err == nil {
				err = call(prefix+"_set_string", func() int { return setString(h, name, v) })
			}
		case bool:
			n := int64(0)
			if v {
				n = 1
			}
			err = call(prefix+"_set_int", func() int { return setInt(h, name, n) })
		case int:
			err = call(prefix+"_set_int", func() int { return setInt(h, name, int64(v)) })
		case int64:
			err = call(prefix+"_set_int", func() int { return setInt(h, name, v) })
		default:
			err = errorf(StatusInvalidArgument, prefix+"_set_int",
				"setting %q: a %T (expected string, int, int64 or bool)", name, v)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// NewServerWith is NewServer with the server's own settings (side "server"
// in docs/configuration.md: session limits, quotas, the memory budget, the
// stage timeout, the transports it serves...) given by name in server; opts
// (may be nil) gives those clients and servers share, its Settings among
// them. Through genie_server_create_with.
func NewServerWith(opts *Options, server Settings, host string, port int) (*Server, error) {
	if opts != nil && opts.EtcdLeaseTTL != 0 {
		if _, set := server["etcd_lease_ttl_ms"]; !set {
			own := Settings{"etcd_lease_ttl_ms": opts.EtcdLeaseTTL.Milliseconds()}
			for k, v := range server {
				own[k] = v
			}
			server = own
		}
	}
	var scfg uintptr
	if err := call("genie_server_config_create", func() int { return capi.Genie_server_config_create(&scfg) }); err != nil {
		return nil, err
	}
	defer capi.Genie_server_config_destroy(scfg)
	if err := applySettings("genie_server_config", scfg, server,
		capi.Genie_server_config_set_int, capi.Genie_server_config_set_string); err != nil {
		return nil, err
	}
	return newServer(opts, host, "genie_server_create_with", func(cfg uintptr, p *uintptr) int {
		return capi.Genie_server_create_with(cfg, scfg, host, port, p)
	})
}
