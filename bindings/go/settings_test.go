package genie_test

import (
	"testing"
	"time"

	"genie.dev/genie"
)

// Settings by name (Options.Settings, NewServerWith) reach
// genie_config_set_int/_string and genie_server_config_set_*: checked by the
// library, and in force.
func TestSettingsByName(t *testing.T) {
	for _, c := range []struct {
		settings genie.Settings
		want     string
	}{
		{genie.Settings{"timeout_ms": -5}, "below 1"},
		{genie.Settings{"max_sessions": 4}, "'max_sessions' is a server's setting"},
		{genie.Settings{"no_such_setting": true}, "no_such_setting"},
		{genie.Settings{"cluster": "bad name!"}, "bad name"},
		{genie.Settings{"timeout_ms": 1.5}, "timeout_ms"},
	} {
		_, err := genie.Init(&genie.Options{IgnoreEnv: true, Settings: c.settings})
		expectErr(t, err, genie.ErrInvalidArgument, c.want)
	}
	_, err := genie.NewServerWith(&genie.Options{IgnoreEnv: true}, genie.Settings{"timeout_ms": 5}, "", 0)
	expectErr(t, err, genie.ErrInvalidArgument, "not a setting of a server alone")

	// A server's own setting in force: one session at most.
	srv, err := genie.NewServerWith(&genie.Options{IgnoreEnv: true}, genie.Settings{"max_sessions": 1}, "", 0)
	must(t, err)
	defer srv.Close()
	port, err := srv.Port()
	must(t, err)
	opts := &genie.Options{IgnoreEnv: true, MasterAddr: "127.0.0.1", MasterPort: port,
		Timeout: 10 * time.Second, Settings: genie.Settings{"graph_deltas": false}}
	ctx := newContext(t, opts)
	if up, err := ctx.IsConnected(); err != nil || !up {
		t.Fatalf("first session connected %v, %v", up, err)
	}
	_, err = genie.Init(opts)
	expectErr(t, err, genie.ErrConnection, "limit")
}
