package actorrt_test

import (
	"os"
	"reflect"
	"regexp"
	"testing"

	"github.com/monarch-go/monarch/actorrt"
)

// TestFailureDocListsItsFields: Failure's doc lists its fields (go doc
// shows no fields of an alias); the list may not drift from the type.
func TestFailureDocListsItsFields(t *testing.T) {
	src, err := os.ReadFile("jobrecord.go")
	if err != nil {
		t.Fatal(err)
	}
	var doc []string
	for _, m := range regexp.MustCompile(`(?m)^//\t(\w+)\s+(\S+)\s+//`).FindAllStringSubmatch(string(src), -1) {
		doc = append(doc, m[1]+" "+m[2])
	}
	var fields []string
	ft := reflect.TypeOf(actorrt.Failure{})
	for i := range ft.NumField() {
		fields = append(fields, ft.Field(i).Name+" "+ft.Field(i).Type.String())
	}
	if !reflect.DeepEqual(doc, fields) {
		t.Errorf("Failure's doc lists %q; its fields are %q", doc, fields)
	}
}
