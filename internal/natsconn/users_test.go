package natsconn

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"
)

func TestParseUsers(t *testing.T) {
	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	for _, tc := range []struct {
		spec string
		want []User
		err  string // substring of the error; "" for success
	}{
		{spec: "", want: nil},
		{spec: "  ", want: nil},
		{spec: "fh:secret:feedhandler,alice:pw1:subscriber", want: []User{
			{Name: "fh", Password: "secret", Role: RoleFeedHandler},
			{Name: "alice", Password: "pw1", Role: RoleSubscriber},
		}},
		{spec: " fh:secret:Feed-Handler , bob:a:b:c:SUBSCRIBER ", want: []User{
			{Name: "fh", Password: "secret", Role: RoleFeedHandler},
			{Name: "bob", Password: "a:b:c", Role: RoleSubscriber},
		}},
		{spec: "carol:nkey=" + pub + ":subscriber", want: []User{{Name: "carol", NKey: pub, Role: RoleSubscriber}}},
		{spec: "h:$2a$11$abcdefghijklmnopqrstuv/ABCDEFGHIJKLMNOPQRSTUVWXYZ012:feedhandler", want: []User{
			{Name: "h", Password: "$2a$11$abcdefghijklmnopqrstuv/ABCDEFGHIJKLMNOPQRSTUVWXYZ012", Role: RoleFeedHandler},
		}},
		{spec: "alice:pw:subscriber:0-2;5, bob:a:b:subscriber:all, carol:pw:subscriber:3;1;1-2", want: []User{
			{Name: "alice", Password: "pw", Role: RoleSubscriber, Channels: []int{0, 1, 2, 5}},
			{Name: "bob", Password: "a:b", Role: RoleSubscriber},
			{Name: "carol", Password: "pw", Role: RoleSubscriber, Channels: []int{1, 2, 3}},
		}},
		{spec: "fh:secret:feedhandler:0", err: `entry 1: user "fh": Channels: only a subscriber has entitlements`},
		{spec: "alice:pw:subscriber:0-x", err: `entry 1: user "alice": channels "0-x": "0-x": want a channel number 0..1023`},
		{spec: "alice:pw:subscriber:3-1", err: `entry 1: user "alice": channels "3-1": range "3-1" ends before it starts`},
		{spec: "alice:pw:subscriber:2000", err: `want a channel number 0..1023`},
		{spec: "alice:pw:admin:0", err: `entry 1: user "alice": unknown role "admin"`},
		{spec: "fh:secret", err: "entry 1: want name:secret:role"},
		{spec: "fh:secret:feedhandler,alice", err: "entry 2: want name:secret:role"},
		{spec: "fh:secret:feedhandler,,alice:pw:subscriber", err: "entry 2: empty"},
		{spec: "fh:secret:feedhandler,", err: "entry 2: empty"},
		{spec: "fh:secret:admin", err: `entry 1: user "fh": unknown role "admin"`},
		{spec: "fh::feedhandler", err: `entry 1: user "fh": Password or NKey required`},
		{spec: ":pw:subscriber", err: `entry 1: user "": Name`},
		{spec: "a.b:pw:subscriber", err: `entry 1: user "a.b": Name`},
		{spec: "a*:pw:subscriber", err: `entry 1: user "a*": Name`},
		{spec: "x:pw:subscriber,c:nkey=" + string(seed) + ":subscriber", err: `entry 2: user "c": NKey is not a public user nkey`},
		{spec: "fh:a:feedhandler,x:b:subscriber,fh:c:subscriber", err: `entry 3: user "fh" already defined at entry 1`},
	} {
		got, err := ParseUsers(tc.spec)
		if tc.err != "" {
			if err == nil {
				t.Errorf("ParseUsers(%q) = %v, want error %q", tc.spec, got, tc.err)
			} else if !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseUsers(%q) error %q, want it to contain %q", tc.spec, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseUsers(%q): %v", tc.spec, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseUsers(%q) = %+v, want %+v", tc.spec, got, tc.want)
		}
	}
}

func TestParseUsersKeepsSecretsOutOfErrors(t *testing.T) {
	_, err := ParseUsers("fh:topsecret:admin")
	if err == nil || strings.Contains(err.Error(), "topsecret") {
		t.Errorf("error %v", err)
	}
}

func TestLoadUsersFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, text string
		want       []User
		err        string
	}{
		{name: "ok", text: "# users of the tickcast feed\n\nfh:se,cr#et:feedhandler\n   # indented comment\n  alice:pw1:subscriber  \n", want: []User{
			{Name: "fh", Password: "se,cr#et", Role: RoleFeedHandler},
			{Name: "alice", Password: "pw1", Role: RoleSubscriber},
		}},
		{name: "empty", text: "# nobody\n", want: nil},
		{name: "crlf", text: "fh:s:feedhandler\r\n", want: []User{{Name: "fh", Password: "s", Role: RoleFeedHandler}}},
		{name: "bad role", text: "fh:s:feedhandler\n\nalice:pw:reader\n", err: `bad role:3: user "alice": unknown role "reader"`},
		{name: "bad line", text: "# x\nalice\n", err: "bad line:2: want name:secret:role"},
		{name: "dup", text: "a:x:subscriber\n# c\na:y:subscriber\n", err: `dup:3: user "a" already defined at `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name)
			if err := os.WriteFile(p, []byte(tc.text), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := LoadUsersFile(p)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want it to contain %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	if _, err := LoadUsersFile(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing file: %v", err)
	}
}

func TestChannelList(t *testing.T) {
	for _, tc := range []struct {
		in, out string
		err     string
	}{
		{"all", "all", ""}, {"ALL", "all", ""}, {"0", "0", ""}, {"0-3;7", "0-3;7", ""},
		{" 7 ; 0-1;2 ", "0-2;7", ""}, {"1;3;5", "1;3;5", ""},
		{"", "", "empty channel list"}, {";", "", `";": ""`}, {"-1", "", "want a channel number"},
	} {
		chans, err := ParseChannels(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseChannels(%q) = %v, %v; want error %q", tc.in, chans, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseChannels(%q): %v", tc.in, err)
			continue
		}
		u := User{Channels: chans}
		if got := u.ChannelList(); got != tc.out {
			t.Errorf("ParseChannels(%q).ChannelList() = %q, want %q", tc.in, got, tc.out)
		}
		for c := range 10 {
			want := tc.out == "all" || slices.Contains(chans, c)
			if u.Entitled(c) != want {
				t.Errorf("%q: Entitled(%d) = %v, want %v", tc.in, c, !want, want)
			}
		}
	}
}

func TestRole(t *testing.T) {
	for _, r := range []Role{RoleFeedHandler, RoleSubscriber} {
		b, err := r.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Role
		if err := back.UnmarshalText(b); err != nil || back != r {
			t.Errorf("%v round trip: %v %v", r, back, err)
		}
	}
	if _, err := RoleNone.MarshalText(); err == nil {
		t.Error("RoleNone marshalled")
	}
	var r Role
	if err := r.UnmarshalText([]byte("root")); err == nil {
		t.Error("unknown role accepted")
	}
}
