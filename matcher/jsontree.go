package matcher

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"unicode/utf8"
)

// The intent is read into this small tree rather than into Go structs because
// encoding/json silently keeps the last of duplicate keys, ignores unknown
// keys and turns numbers into float64; each of these would let two different
// bodies mean the same intent, or one body mean something the sender did not.

type jsonKind int

const (
	jsonNull jsonKind = iota
	jsonBool
	jsonString
	jsonNumber
	jsonObject
	jsonArray
)

func (k jsonKind) String() string {
	return [...]string{"null", "a boolean", "a string", "a number", "an object", "an array"}[k]
}

type jsonValue struct {
	kind jsonKind
	str  string                // jsonString
	keys []string              // jsonObject, in document order
	obj  map[string]*jsonValue // jsonObject
}

// parseJSON reads exactly one JSON value. A repeated key is a *dupKeyError
// carrying its path, so the refusal can name the field.
func parseJSON(data []byte) (*jsonValue, error) {
	if !utf8.Valid(data) {
		return nil, errors.New("body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := readValue(dec, "")
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

type dupKeyError struct{ path string }

func (e *dupKeyError) Error() string { return "duplicate key " + e.path }

func readValue(dec *json.Decoder, path string) (*jsonValue, error) {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return nil, errors.New("unexpected end of JSON")
		}
		return nil, err
	}
	switch t := tok.(type) {
	case nil:
		return &jsonValue{kind: jsonNull}, nil
	case bool:
		return &jsonValue{kind: jsonBool}, nil
	case string:
		return &jsonValue{kind: jsonString, str: t}, nil
	case json.Number:
		return &jsonValue{kind: jsonNumber, str: string(t)}, nil
	case json.Delim:
		switch t {
		case '{':
			v := &jsonValue{kind: jsonObject, obj: map[string]*jsonValue{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, ok := kt.(string)
				if !ok {
					return nil, errors.New("object key is not a string")
				}
				p := k
				if path != "" {
					p = path + "." + k
				}
				if _, dup := v.obj[k]; dup {
					return nil, &dupKeyError{path: p}
				}
				child, err := readValue(dec, p)
				if err != nil {
					return nil, err
				}
				v.keys = append(v.keys, k)
				v.obj[k] = child
			}
			if _, err := dec.Token(); err != nil { // '}'
				return nil, err
			}
			return v, nil
		case '[':
			// No intent field is an array; the elements are read only to
			// find syntax errors and duplicate keys inside them.
			for dec.More() {
				if _, err := readValue(dec, path+"[]"); err != nil {
					return nil, err
				}
			}
			if _, err := dec.Token(); err != nil { // ']'
				return nil, err
			}
			return &jsonValue{kind: jsonArray}, nil
		}
	}
	return nil, errors.New("unexpected JSON token")
}
