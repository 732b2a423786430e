// Pins go-tpc and every module it is built from (go.mod, go.sum); `make tools` builds
// it into .tools/bin. The build tag keeps this file out of every ordinary build.

//go:build tools

package tools

import _ "github.com/pingcap/go-tpc/cmd/go-tpc"
