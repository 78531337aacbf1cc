package schedule

import (
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		spec string
		want string // String() of the schedule
	}{
		{"", "always"},
		{"   ", "always"},
		{"always", "always"},
		{" Always ", "always"},
		{"mon-fri 08:00-18:00, 22:30-01:00", "mon-fri 08:00-18:00, 22:30-01:00"},
		{"mon-fri 08:00-18:00; 22:30-01:00", "mon-fri 08:00-18:00, 22:30-01:00"},
		{"sat,sun 00:00-24:00", "sat,sun 00:00-24:00"},
		{"sat, sun 00:00-24:00", "sat,sun 00:00-24:00"},
		{"sun sat 00:00-24:00", "sat,sun 00:00-24:00"},
		{"daily 09:00-17:00", "daily 09:00-17:00"},
		{"09:00-17:00", "daily 09:00-17:00"},
		{"mon 22:00-06:00; wed 10:00-12:00", "mon 22:00-06:00; wed 10:00-12:00"},
		{"mon 22:00-06:00, wed 10:00-12:00", "mon 22:00-06:00; wed 10:00-12:00"},
		{"mon 22:00-06:00; 10:00-12:00", "mon 22:00-06:00, 10:00-12:00"},
		{"fri-mon 18:00-24:00", "fri-mon 18:00-24:00"},
		{"sun-sat 8:00-9:30", "daily 08:00-09:30"},
		{"mon-sun 00:00-24:00", "daily 00:00-24:00"},
		{"mon,tue,wed,thu,fri 08:00-18:00", "mon-fri 08:00-18:00"},
		{"mon,wed,fri 08:00-18:00", "mon,wed,fri 08:00-18:00"},
		{"mon-wed fri 08:00-18:00", "mon-wed,fri 08:00-18:00"},
		{"sun mon 22:00-02:00", "sun,mon 22:00-02:00"},
		{"sat-mon 10:00-11:00", "sat-mon 10:00-11:00"},
		{"fri-fri 10:00-11:00", "fri 10:00-11:00"},
		{"MON - FRI 08:00 - 18:00", "mon-fri 08:00-18:00"},
		{"mon 08:00-09:00 mon 10:00-11:00", "mon 08:00-09:00, 10:00-11:00"},
		{"mon 08:00-09:00 tue 10:00-11:00 mon 12:00-13:00", "mon 08:00-09:00; tue 10:00-11:00; mon 12:00-13:00"},
		{"22:00-00:00", "daily 22:00-00:00"},
		{"00:01-00:00", "daily 00:01-00:00"},
		{"daily mon 09:00-17:00", "daily 09:00-17:00"},
		{"09:00-10:00 sat 11:00-12:00", "daily 09:00-10:00; sat 11:00-12:00"},
		{"mon-fri\t08:00-18:00,\n22:30-01:00;", "mon-fri 08:00-18:00, 22:30-01:00"},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			s, err := Parse(tt.spec, time.UTC)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if got := s.String(); got != tt.want {
				t.Errorf("String() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParse_errors(t *testing.T) {
	tests := []struct {
		spec string
		want string
	}{
		{"mon-fry 08:00-18:00", `schedule: "mon-fry 08:00-18:00": unknown day "fry"`},
		{"monday 08:00-18:00", `schedule: "monday 08:00-18:00": unknown day "monday"`},
		{"mon 25:00-26:00", `schedule: "mon 25:00-26:00": "25:00" is not a time of day`},
		{"mon 08:00-18:60", `schedule: "mon 08:00-18:60": "18:60" is not a time of day`},
		{"mon 08:00-24:30", `schedule: "mon 08:00-24:30": "24:30" is not a time of day`},
		{"mon 0800-1800", `schedule: "mon 0800-1800": "0800" is not a time of day`},
		{"mon 8:0-18:00", `schedule: "mon 8:0-18:00": "8:0" is not a time of day`},
		{"mon 008:00-18:00", `schedule: "mon 008:00-18:00": "008:00" is not a time of day`},
		{"mon 08:00-08:00", `schedule: "mon 08:00-08:00": window 08:00-08:00 is empty`},
		{"00:00-00:00", `schedule: "00:00-00:00": window 00:00-00:00 is empty`},
		{"mon 24:00-02:00", `schedule: "mon 24:00-02:00": window 24:00-02:00 cannot start at 24:00`},
		{"mon 08:00", `schedule: "mon 08:00": "08:00" is not a window such as 08:00-18:00`},
		{"mon 08:00-", `schedule: "mon 08:00-": "08:00-" is not a window such as 08:00-18:00`},
		{"mon 08:00-12:00-18:00", `schedule: "mon 08:00-12:00-18:00": "08:00-12:00-18:00" is not a window such as 08:00-18:00`},
		{"mon-fri", `schedule: "mon-fri": no window after "mon-fri"`},
		{"mon 08:00-18:00 sat,sun", `schedule: "mon 08:00-18:00 sat,sun": no window after "sat,sun"`},
		{"mon-", `schedule: "mon-": "mon-" is not a day or a range of days such as mon-fri`},
		{"mon-wed-fri 08:00-18:00", `schedule: "mon-wed-fri 08:00-18:00": "mon-wed-fri" is not a day or a range of days such as mon-fri`},
		{"always mon 08:00-18:00", `schedule: "always mon 08:00-18:00": "always" must stand alone`},
		{"mon 08:00-18:00 !", `schedule: "mon 08:00-18:00 !": unexpected "!"`},
		{"-mon 08:00-18:00", `schedule: "-mon 08:00-18:00": unexpected "-mon"`},
		{"mon 8-18", `schedule: "mon 8-18": "8" is not a time of day`},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			s, err := Parse(tt.spec, time.UTC)
			if err == nil {
				t.Fatalf("Parse = %q, want error %q", s, tt.want)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error = %s\nwant    %s", got, tt.want)
			}
		})
	}
}

func TestParse_noLocation(t *testing.T) {
	if _, err := Parse("always", nil); err == nil || err.Error() != "schedule: no time zone" {
		t.Errorf("Parse with no location: error = %v, want schedule: no time zone", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, spec := range []string{
		"", "always", "mon-fri 08:00-18:00, 22:30-01:00", "sat,sun 00:00-24:00", "daily 09:00-17:00",
		"mon 22:00-06:00; wed 10:00-12:00", "fri-mon 18:00-24:00", "sun 23:00-01:00", "8:00 - 9:00",
		"mon-fry 08:00-18:00", "mon 25:00-26:00", "mon 08:00-08:00", "mon,wed 24:00-01:00",
	} {
		f.Add(spec)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		s, err := Parse(spec, time.UTC)
		if err != nil {
			return
		}
		normal := s.String()
		again, err := Parse(normal, time.UTC)
		if err != nil {
			t.Fatalf("Parse(%q).String() = %q, which does not parse: %v", spec, normal, err)
		}
		if got := again.String(); got != normal {
			t.Fatalf("Parse(%q).String() = %q, but parsing that gives %q", spec, normal, got)
		}
		if again.open != s.open {
			t.Fatalf("Parse(%q) and Parse(%q) differ", spec, normal)
		}
	})
}
