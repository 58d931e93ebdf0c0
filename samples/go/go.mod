module genie.dev/samples/mlp

go 1.19

require genie.dev/genie v0.0.0

replace genie.dev/genie => ../../bindings/go
