package proc

import (
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestParseNetTCP(t *testing.T) {
	const header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	cases := []struct {
		name    string
		in      string
		want    []Listener
		wantErr string
	}{
		{name: "v4 listener and an established one",
			in: header +
				"   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 1 0000000000000000 100 0 0 10 0\n" +
				"   1: 0100007F:1F90 0100007F:D3A2 01 00000000:00000000 00:00000000 00000000     0        0 12346 1 0000000000000000 20 4 30 10 -1\n",
			want: []Listener{{Addr: netip.MustParseAddrPort("127.0.0.1:8080"), Inode: 12345}}},
		{name: "v4 any",
			in:   header + "   0: 00000000:0050 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 7 1 0 100 0 0 10 0\n",
			want: []Listener{{Addr: netip.MustParseAddrPort("0.0.0.0:80"), Inode: 7}}},
		{name: "v6 loopback",
			in:   header + "   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 99 1 0 100 0 0 10 0\n",
			want: []Listener{{Addr: netip.MustParseAddrPort("[::1]:8080"), Inode: 99}}},
		{name: "v4-mapped v6 is v4",
			in:   header + "   0: 0000000000000000FFFF00000100007F:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5 1 0 100 0 0 10 0\n",
			want: []Listener{{Addr: netip.MustParseAddrPort("127.0.0.1:8080"), Inode: 5}}},
		{name: "empty", in: header},
		{name: "short line", in: header + "   0: 0100007F:1F90 00000000:0000 0A\n", wantErr: "line 2: 4 fields"},
		{name: "bad address", in: header + "   0: 0100007:1F90 00000000:0000 0A 0:0 0:0 0 0 0 12 1\n", wantErr: "line 2: local address"},
		{name: "bad inode", in: header + "   0: 0100007F:1F90 00000000:0000 0A 0:0 0:0 0 0 0 x 1\n", wantErr: "line 2: inode"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := parseNetTCP(strings.NewReader(c.in))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("got %v, want %v", got, c.want)
			}
		})
	}
}

func FuzzParseNetTCP(f *testing.F) {
	f.Add("  sl  local_address rem_address   st\n   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 12345 1\n")
	f.Add("   0: 00000000000000000000000001000000:1F90 0:0 0A 0 0 0 0 0 99\n")
	f.Fuzz(func(t *testing.T, in string) {
		ls, _ := parseNetTCP(strings.NewReader(in))
		for _, l := range ls {
			if !l.Addr.IsValid() {
				t.Fatalf("invalid address in %v", l)
			}
		}
	})
}

// TestListenersOfThisProcess: a socket this process listens on is found on
// its port, v4 and v6, and this process is its holder; another process is
// not.
func TestListenersOfThisProcess(t *testing.T) {
	for _, network := range []string{"tcp4", "tcp6"} {
		t.Run(network, func(t *testing.T) {
			addr := "127.0.0.1:0"
			if network == "tcp6" {
				addr = "[::1]:0"
			}
			l, err := net.Listen(network, addr)
			if err != nil {
				t.Skipf("cannot listen on %s: %v", addr, err)
			}
			defer l.Close()
			port := l.Addr().(*net.TCPAddr).Port
			ls, err := Listeners(os.Getpid(), port)
			if err != nil || len(ls) != 1 {
				t.Fatalf("Listeners = %v, %v; want one", ls, err)
			}
			inodes := []uint64{ls[0].Inode}
			if got := SocketHolders([]int{os.Getpid(), os.Getppid()}, inodes); !slices.Equal(got, []int{os.Getpid()}) {
				t.Fatalf("SocketHolders = %v, want [%d]", got, os.Getpid())
			}
			if got := FindSocketHolders(inodes); !slices.Equal(got, []int{os.Getpid()}) {
				t.Fatalf("FindSocketHolders = %v, want [%d]", got, os.Getpid())
			}
			l.Close()
			if ls, _ := Listeners(os.Getpid(), port); len(ls) != 0 {
				t.Fatalf("Listeners after Close = %v", ls)
			}
		})
	}
}
