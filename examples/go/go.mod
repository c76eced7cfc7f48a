module picket.dev/picket/examples/go

go 1.19

require picket.dev/picket v0.0.0

replace picket.dev/picket => ../../client/go
