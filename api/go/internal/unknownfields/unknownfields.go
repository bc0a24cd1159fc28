// Package unknownfields reads and writes the JSON of an object whose CRD keeps fields its Go type does not declare
// (x-kubernetes-preserve-unknown-fields): the generated types keep those in a field of their own, so a Go client
// that reads such an object and writes it back drops nothing.
package unknownfields

import "encoding/json"

// Read decodes data into declared (a pointer to the type without its JSON methods) and returns the fields whose key
// is not one of keys, or nil when there are none.
func Read(data []byte, declared any, keys []string) (map[string]json.RawMessage, error) {
	if err := json.Unmarshal(data, declared); err != nil {
		return nil, err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, err
	}
	for _, key := range keys {
		delete(all, key)
	}
	if len(all) == 0 {
		return nil, nil
	}
	return all, nil
}

// Write encodes declared (the type without its JSON methods) and adds the unknown fields whose key it does not use.
func Write(declared any, unknown map[string]json.RawMessage) ([]byte, error) {
	data, err := json.Marshal(declared)
	if err != nil || len(unknown) == 0 {
		return data, err
	}
	all := map[string]json.RawMessage{}
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, err
	}
	for key, value := range unknown {
		if _, isDeclared := all[key]; !isDeclared {
			all[key] = value
		}
	}
	return json.Marshal(all)
}
