module picket.dev/picket

go 1.19
