// Package regmodel is the porcupine model the linearizability tests check
// histories against: one register per key, where a put sets the register
// and a get must return what it holds. Only tests import it.
package regmodel

import (
	"fmt"

	"github.com/anishathalye/porcupine"
)

// Input is one operation: a put of Value at Key, or a get of Key.
type Input struct {
	Put        bool
	Key, Value string
}

// Output is what a get returned (empty for a put).
type Output struct{ Value string }

// Model checks each key's register on its own.
var Model = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(Input).Key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		in := input.(Input)
		if in.Put {
			return true, in.Value
		}
		return output.(Output).Value == state.(string), state
	},
	Equal: func(a, b any) bool { return a == b },
	DescribeOperation: func(input, output any) string {
		in := input.(Input)
		if in.Put {
			return fmt.Sprintf("put(%s, %s)", in.Key, in.Value)
		}
		return fmt.Sprintf("get(%s) -> %s", in.Key, output.(Output).Value)
	},
}
