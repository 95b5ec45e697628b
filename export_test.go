package legion

import "encoding/json"

func MarshalJSONValue(v any) ([]byte, error)   { return json.Marshal(v) }
func unmarshalJSONValue(b []byte, v any) error { return json.Unmarshal(b, v) }
