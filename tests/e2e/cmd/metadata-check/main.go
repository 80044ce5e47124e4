// Command metadata-check is the upstream judge of simdra's device metadata files: it
// decodes each file named on the command line with k8s.io/dynamic-resource-allocation's
// own consumer-side decoder (devicemetadata.DecodeMetadataFromStream, with the API's
// declarative validation on) and prints one JSON line per file with what it decoded, the
// API version it chose and the validation error, if any. A file it cannot decode at all
// prints {"file": ..., "error": ...} and makes the exit status 1.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/dynamic-resource-allocation/api/metadata"
	"k8s.io/dynamic-resource-allocation/devicemetadata"
)

type device struct {
	Driver     string         `json:"driver"`
	Pool       string         `json:"pool"`
	Name       string         `json:"name"`
	Attributes map[string]any `json:"attributes,omitempty"`
}

type request struct {
	Name    string   `json:"name"`
	Devices []device `json:"devices"`
}

type verdict struct {
	File         string    `json:"file"`
	Error        string    `json:"error,omitempty"`
	APIVersion   string    `json:"apiVersion,omitempty"`
	Invalid      string    `json:"invalid,omitempty"`
	Namespace    string    `json:"namespace,omitempty"`
	Name         string    `json:"name,omitempty"`
	UID          string    `json:"uid,omitempty"`
	Generation   int64     `json:"generation,omitempty"`
	PodClaimName *string   `json:"podClaimName,omitempty"`
	Requests     []request `json:"requests,omitempty"`
}

func check(path string) verdict {
	data, err := os.ReadFile(path)
	if err != nil {
		return verdict{File: path, Error: err.Error()}
	}
	var md metadata.DeviceMetadata
	var gvk schema.GroupVersionKind
	var invalid error
	err = devicemetadata.DecodeMetadataFromStream(json.NewDecoder(bytes.NewReader(data)), &md,
		devicemetadata.DecodeMetadataWithValidationResult(&invalid),
		devicemetadata.DecodeMetadataStoreGVKResult(&gvk))
	if err != nil {
		return verdict{File: path, Error: err.Error()}
	}
	out := verdict{File: path, APIVersion: gvk.GroupVersion().String(), Namespace: md.Namespace,
		Name: md.Name, UID: string(md.UID), Generation: md.Generation,
		PodClaimName: md.PodClaimName}
	if invalid != nil {
		out.Invalid = invalid.Error()
	}
	for _, r := range md.Requests {
		req := request{Name: r.Name, Devices: []device{}}
		for _, d := range r.Devices {
			attrs := map[string]any{}
			for k, v := range d.Attributes {
				attrs[string(k)] = v
			}
			req.Devices = append(req.Devices, device{Driver: d.Driver, Pool: d.Pool, Name: d.Name,
				Attributes: attrs})
		}
		out.Requests = append(out.Requests, req)
	}
	return out
}

func main() {
	status := 0
	for _, path := range os.Args[1:] {
		v := check(path)
		if v.Error != "" {
			status = 1
		}
		line, _ := json.Marshal(v)
		fmt.Println(string(line))
	}
	os.Exit(status)
}
