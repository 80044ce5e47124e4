// Oracle for tests/testing/test_allocator_cel_vs_cel_go.py (run by regenerate.sh): compiles
// and evaluates DRA CEL selectors with k8s.io/dynamic-resource-allocation/cel, as the scheduler does.
// stdin: {"driver": "...", "device": <resource.k8s.io/v1 Device JSON>, "expressions": [...]}
// stdout: [{"compile": "..."} | {"matches": bool} | {"runtime": "..."}]; LISTS=1 enables DRAListTypeAttributes.
package main

import (
	"context"
	"encoding/json"
	"os"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/cel"
)

type input struct {
	Driver      string             `json:"driver"`
	Device      resourceapi.Device `json:"device"`
	Expressions []string           `json:"expressions"`
}

type output struct {
	Compile *string `json:"compile,omitempty"`
	Matches *bool   `json:"matches,omitempty"`
	Runtime *string `json:"runtime,omitempty"`
}

func main() {
	var in input
	if err := json.NewDecoder(os.Stdin).Decode(&in); err != nil {
		panic(err)
	}
	compiler := cel.GetCompiler(cel.Features{EnableConsumableCapacity: true, EnableListTypeAttributes: os.Getenv("LISTS") != ""})
	device := cel.Device{
		Driver:                   in.Driver,
		AllowMultipleAllocations: in.Device.AllowMultipleAllocations,
		Attributes:               in.Device.Attributes,
		Capacity:                 in.Device.Capacity,
	}
	var out []output
	for _, expr := range in.Expressions {
		result := compiler.CompileCELExpression(expr, cel.Options{})
		if result.Error != nil {
			msg := result.Error.Error()
			out = append(out, output{Compile: &msg})
			continue
		}
		matches, _, err := result.DeviceMatches(context.Background(), device)
		if err != nil {
			msg := err.Error()
			out = append(out, output{Runtime: &msg})
			continue
		}
		out = append(out, output{Matches: &matches})
	}
	json.NewEncoder(os.Stdout).Encode(out)
}
