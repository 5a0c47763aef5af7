package adapter

import (
	"fmt"
	"os"
	"testing"
)

func TestZZDump(t *testing.T) {
	dir := os.Getenv("DUMPDIR")
	if dir == "" {
		t.Skip()
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		data, _ := os.ReadFile(dir + "/" + e.Name())
		fmt.Printf("== %s\n", e.Name())
		func() {
			defer func() {
				if r := recover(); r != nil {
					fmt.Println("  PANIC", r)
				}
			}()
			_, ps := Parse("a.yaml", data)
			for _, p := range ps {
				fmt.Printf("  {%d, %d, %q, %q, %v},\n", p.Pos.Line, p.Pos.Column, p.Field, p.Msg, p.Warning)
			}
		}()
	}
}
