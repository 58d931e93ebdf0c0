module genie.dev/genie

go 1.19
