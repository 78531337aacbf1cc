package schedule

import (
	"slices"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, also on a machine without a zoneinfo database
)

func mustLoad(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func mustParse(t *testing.T, spec string, loc *time.Location) *Schedule {
	t.Helper()
	s, err := Parse(spec, loc)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// at reads "2006-01-02 15:04[:05]" in loc. Use UTC for instants that clocks in loc show twice.
func at(t *testing.T, loc *time.Location, s string) time.Time {
	t.Helper()
	layout := "2006-01-02 15:04"
	if len(s) > len(layout) {
		layout += ":05"
	}
	tm, err := time.ParseInLocation(layout, s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

func TestSchedule_Open(t *testing.T) {
	berlin := mustLoad(t, "Europe/Berlin")
	tests := []struct {
		spec string
		at   string // in Europe/Berlin; 2024-06-03 is a Monday
		want bool
	}{
		{"mon-fri 08:00-18:00, 22:30-01:00", "2024-06-03 07:59:59", false},
		{"mon-fri 08:00-18:00, 22:30-01:00", "2024-06-03 08:00", true},
		{"mon-fri 08:00-18:00, 22:30-01:00", "2024-06-03 17:59:59", true},
		{"mon-fri 08:00-18:00, 22:30-01:00", "2024-06-03 18:00", false},
		{"mon-fri 08:00-18:00, 22:30-01:00", "2024-06-03 22:29", false},
		{"mon-fri 08:00-18:00, 22:30-01:00", "2024-06-03 22:30", true},
		{"mon-fri 08:00-18:00, 22:30-01:00", "2024-06-04 00:00", true},
		{"mon-fri 08:00-18:00, 22:30-01:00", "2024-06-04 00:59:59", true},
		{"mon-fri 08:00-18:00, 22:30-01:00", "2024-06-04 01:00", false},
		{"mon-fri 08:00-18:00, 22:30-01:00", "2024-06-08 00:30", true},  // Friday night
		{"mon-fri 08:00-18:00, 22:30-01:00", "2024-06-08 10:00", false}, // Saturday
		{"mon-fri 08:00-18:00, 22:30-01:00", "2024-06-09 23:00", false}, // Sunday night
		{"mon-fri 08:00-18:00, 22:30-01:00", "2024-06-10 00:30", false}, // after Sunday
		{"sun 23:00-01:00", "2024-06-09 22:59", false},
		{"sun 23:00-01:00", "2024-06-09 23:00", true},
		{"sun 23:00-01:00", "2024-06-10 00:30", true}, // the week wraps
		{"sun 23:00-01:00", "2024-06-10 01:00", false},
		{"sun 23:00-01:00", "2024-06-03 00:30", true},
		{"fri-mon 18:00-24:00", "2024-06-03 18:00", true},
		{"fri-mon 18:00-24:00", "2024-06-03 23:59:59", true},
		{"fri-mon 18:00-24:00", "2024-06-04 00:00", false},
		{"fri-mon 18:00-24:00", "2024-06-04 18:00", false},
		{"fri-mon 18:00-24:00", "2024-06-06 23:00", false},
		{"fri-mon 18:00-24:00", "2024-06-07 18:00", true},
		{"sat,sun 00:00-24:00", "2024-06-08 00:00", true},
		{"sat,sun 00:00-24:00", "2024-06-09 23:59:59", true},
		{"sat,sun 00:00-24:00", "2024-06-10 00:00", false},
		{"daily 22:00-00:00", "2024-06-05 23:59", true},
		{"daily 22:00-00:00", "2024-06-06 00:00", false},
		{"always", "2024-06-05 03:00", true},
		{"", "2024-06-05 03:00", true},
	}
	for _, tt := range tests {
		t.Run(tt.spec+" at "+tt.at, func(t *testing.T) {
			s := mustParse(t, tt.spec, berlin)
			if got := s.Open(at(t, berlin, tt.at)); got != tt.want {
				t.Errorf("Open = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSchedule_Open_otherZone(t *testing.T) {
	s := mustParse(t, "mon-fri 08:00-18:00", mustLoad(t, "Europe/Berlin"))
	// 06:00 UTC is 08:00 in Berlin in summer; 06:30 UTC is 01:30 in New York.
	tm := at(t, time.UTC, "2024-06-03 06:00")
	if !s.Open(tm) || !s.Open(tm.In(mustLoad(t, "America/New_York"))) {
		t.Errorf("Open(%v) = false, want true", tm)
	}
	if s.Open(tm.Add(-time.Nanosecond)) {
		t.Errorf("Open(%v) = true, want false", tm.Add(-time.Nanosecond))
	}
}

func TestSchedule_zero(t *testing.T) {
	for _, s := range []*Schedule{nil, {}} {
		now := time.Date(2024, 6, 3, 12, 0, 0, 0, time.UTC)
		if !s.Open(now) {
			t.Errorf("%#v: Open = false, want true", s)
		}
		if got := s.Next(now); !got.IsZero() {
			t.Errorf("%#v: Next = %v, want the zero time", s, got)
		}
		if got := s.Overlap(now, now.Add(time.Hour)); got != time.Hour {
			t.Errorf("%#v: Overlap = %v, want 1h", s, got)
		}
		if got := s.String(); got != "always" {
			t.Errorf("%#v: String = %q, want always", s, got)
		}
	}
}

// TestSchedule_Next follows a schedule from one instant through its changes.
func TestSchedule_Next(t *testing.T) {
	berlin := mustLoad(t, "Europe/Berlin")
	tests := []struct {
		name string
		spec string
		from string   // in Europe/Berlin
		want []string // the next instants, one after the other, in Europe/Berlin
	}{
		{
			name: "weekdays from Monday",
			spec: "mon-fri 08:00-18:00, 22:30-01:00",
			from: "2024-06-03 00:00",
			want: []string{"2024-06-03 08:00", "2024-06-03 18:00", "2024-06-03 22:30", "2024-06-04 01:00", "2024-06-04 08:00"},
		},
		{
			name: "weekdays over the weekend",
			spec: "mon-fri 08:00-18:00, 22:30-01:00",
			from: "2024-06-07 12:00",
			want: []string{"2024-06-07 18:00", "2024-06-07 22:30", "2024-06-08 01:00", "2024-06-10 08:00"},
		},
		{
			name: "from inside a minute",
			spec: "daily 08:00-18:00",
			from: "2024-06-03 07:59:30",
			want: []string{"2024-06-03 08:00", "2024-06-03 18:00", "2024-06-04 08:00"},
		},
		{
			name: "from the instant a window opens",
			spec: "daily 08:00-18:00",
			from: "2024-06-03 08:00",
			want: []string{"2024-06-03 18:00"},
		},
		{
			name: "across the week's end",
			spec: "sun 23:00-01:00",
			from: "2024-06-09 12:00",
			want: []string{"2024-06-09 23:00", "2024-06-10 01:00", "2024-06-16 23:00"},
		},
		{
			name: "overlapping windows merge",
			spec: "mon 08:00-12:00, 11:00-14:00; mon-tue 13:00-15:00",
			from: "2024-06-03 00:00",
			want: []string{"2024-06-03 08:00", "2024-06-03 15:00", "2024-06-04 13:00", "2024-06-04 15:00", "2024-06-10 08:00"},
		},
		{
			name: "days that join up",
			spec: "sat,sun 00:00-24:00",
			from: "2024-06-05 12:00",
			want: []string{"2024-06-08 00:00", "2024-06-10 00:00", "2024-06-15 00:00"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, tt.spec, berlin)
			cur := at(t, berlin, tt.from)
			for _, w := range tt.want {
				next := s.Next(cur)
				if want := at(t, berlin, w); !next.Equal(want) {
					t.Fatalf("Next(%v) = %v, want %v", cur, next, want)
				}
				if s.Open(next) == s.Open(next.Add(-time.Nanosecond)) {
					t.Errorf("Open does not change at %v", next)
				}
				cur = next
			}
		})
	}
}

func TestSchedule_Next_never(t *testing.T) {
	for _, spec := range []string{"always", "daily 00:00-24:00", "mon-fri 00:00-24:00; sat,sun 12:00-12:30, 12:30-12:00; sat 00:00-12:00"} {
		s := mustParse(t, spec, time.UTC)
		if got := s.Next(time.Date(2024, 6, 3, 12, 0, 0, 0, time.UTC)); !got.IsZero() {
			t.Errorf("%q: Next = %v, want the zero time", spec, got)
		}
	}
}

func TestSchedule_Overlap(t *testing.T) {
	berlin := mustLoad(t, "Europe/Berlin")
	tests := []struct {
		spec     string
		from, to string // in Europe/Berlin
		want     time.Duration
	}{
		{"mon-fri 08:00-18:00", "2024-06-03 00:00", "2024-06-10 00:00", 50 * time.Hour},
		{"mon-fri 08:00-18:00, 22:30-01:00", "2024-06-03 00:00", "2024-06-10 00:00", 50*time.Hour + 5*150*time.Minute},
		{"mon-fri 08:00-18:00", "2024-06-03 07:00", "2024-06-03 09:30", 90 * time.Minute},
		{"mon-fri 08:00-18:00", "2024-06-03 09:00", "2024-06-03 09:30", 30 * time.Minute},
		{"mon-fri 08:00-18:00", "2024-06-03 18:00", "2024-06-03 19:30", 0},
		{"mon-fri 08:00-18:00", "2024-06-03 10:00", "2024-06-03 09:00", 0},
		{"sun 23:00-01:00", "2024-06-09 23:30", "2024-06-10 00:15", 45 * time.Minute},
		{"always", "2024-06-03 00:00", "2024-06-03 03:00", 3 * time.Hour},
		{"daily 00:00-24:00", "2024-06-03 00:00", "2024-06-05 00:00", 48 * time.Hour},
		{"daily 09:00-17:00", "2024-01-01 00:00", "2025-01-01 00:00", 366 * 8 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.spec+" from "+tt.from, func(t *testing.T) {
			s := mustParse(t, tt.spec, berlin)
			if got := s.Overlap(at(t, berlin, tt.from), at(t, berlin, tt.to)); got != tt.want {
				t.Errorf("Overlap = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestSchedule_daylightSaving checks windows on the days clocks change. Instants are in UTC,
// since clocks show some local times twice on those days.
//
//	Europe/Berlin     2024-03-31 01:00 UTC: 02:00 CET becomes 03:00 CEST
//	                  2024-10-27 01:00 UTC: 03:00 CEST becomes 02:00 CET
//	America/New_York  2024-03-10 07:00 UTC: 02:00 EST becomes 03:00 EDT
//	                  2024-11-03 06:00 UTC: 02:00 EDT becomes 01:00 EST
//	America/Santiago  2024-04-07 03:00 UTC: Saturday 24:00 -03 becomes Saturday 23:00 -04
//	                  2024-09-08 04:00 UTC: Saturday 24:00 -04 becomes Sunday 01:00 -03
func TestSchedule_daylightSaving(t *testing.T) {
	tests := []struct {
		name     string
		zone     string
		spec     string
		from, to string        // UTC, around the change
		changes  []string      // the instants Open changes, UTC
		overlap  time.Duration // real time open in [from, to)
	}{
		{
			name: "Berlin spring: a window inside the gap does not open",
			zone: "Europe/Berlin", spec: "sun 02:00-03:00",
			from: "2024-03-30 12:00", to: "2024-03-31 12:00",
			changes: nil, overlap: 0,
		},
		{
			name: "Berlin spring: a window across the gap opens when clocks jump",
			zone: "Europe/Berlin", spec: "sun 02:30-04:00",
			from: "2024-03-30 12:00", to: "2024-03-31 12:00",
			changes: []string{"2024-03-31 01:00", "2024-03-31 02:00"}, overlap: time.Hour,
		},
		{
			name: "Berlin spring: a window into the gap closes when clocks jump",
			zone: "Europe/Berlin", spec: "sun 00:00-02:30",
			from: "2024-03-30 12:00", to: "2024-03-31 12:00",
			changes: []string{"2024-03-30 23:00", "2024-03-31 01:00"}, overlap: 2 * time.Hour,
		},
		{
			name: "Berlin autumn: the repeated hour is open twice",
			zone: "Europe/Berlin", spec: "sun 02:00-03:00",
			from: "2024-10-26 12:00", to: "2024-10-27 12:00",
			changes: []string{"2024-10-27 00:00", "2024-10-27 02:00"}, overlap: 2 * time.Hour,
		},
		{
			name: "Berlin autumn: a window inside the repeated hour opens twice",
			zone: "Europe/Berlin", spec: "sun 02:30-04:00",
			from: "2024-10-26 12:00", to: "2024-10-27 12:00",
			changes: []string{"2024-10-27 00:30", "2024-10-27 01:00", "2024-10-27 01:30", "2024-10-27 03:00"},
			overlap: 2 * time.Hour,
		},
		{
			name: "Berlin: 22:30-01:00 is 2.5 hours on both nights, as clocks change at 02:00",
			zone: "Europe/Berlin", spec: "sat 22:30-01:00",
			from: "2024-03-30 12:00", to: "2024-03-31 12:00",
			changes: []string{"2024-03-30 21:30", "2024-03-31 00:00"}, overlap: 150 * time.Minute,
		},
		{
			name: "New York spring: a window into the gap closes when clocks jump",
			zone: "America/New_York", spec: "sun 01:30-02:30",
			from: "2024-03-09 12:00", to: "2024-03-10 12:00",
			changes: []string{"2024-03-10 06:30", "2024-03-10 07:00"}, overlap: 30 * time.Minute,
		},
		{
			name: "New York spring: a window inside the gap does not open",
			zone: "America/New_York", spec: "sun 02:00-03:00",
			from: "2024-03-09 12:00", to: "2024-03-10 12:00",
			changes: nil, overlap: 0,
		},
		{
			name: "New York autumn: the repeated hour is open twice",
			zone: "America/New_York", spec: "sun 01:00-02:00",
			from: "2024-11-02 12:00", to: "2024-11-03 12:00",
			changes: []string{"2024-11-03 05:00", "2024-11-03 07:00"}, overlap: 2 * time.Hour,
		},
		{
			name: "New York autumn: a night window is an hour longer",
			zone: "America/New_York", spec: "sat 22:30-03:00",
			from: "2024-11-02 12:00", to: "2024-11-03 12:00",
			changes: []string{"2024-11-03 02:30", "2024-11-03 08:00"}, overlap: 330 * time.Minute,
		},
		{
			name: "Santiago spring: 22:30-01:00 is 1.5 hours",
			zone: "America/Santiago", spec: "sat 22:30-01:00",
			from: "2024-09-07 12:00", to: "2024-09-08 12:00",
			changes: []string{"2024-09-08 02:30", "2024-09-08 04:00"}, overlap: 90 * time.Minute,
		},
		{
			name: "Santiago autumn: 22:30-01:00 is 3.5 hours",
			zone: "America/Santiago", spec: "sat 22:30-01:00",
			from: "2024-04-06 12:00", to: "2024-04-07 12:00",
			changes: []string{"2024-04-07 01:30", "2024-04-07 05:00"}, overlap: 210 * time.Minute,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustParse(t, tt.spec, mustLoad(t, tt.zone))
			from, to := at(t, time.UTC, tt.from), at(t, time.UTC, tt.to)
			var got []string
			for cur := s.Next(from); cur.Before(to); cur = s.Next(cur) {
				got = append(got, cur.UTC().Format("2006-01-02 15:04"))
			}
			if !slices.Equal(got, tt.changes) {
				t.Errorf("changes = %q, want %q", got, tt.changes)
			}
			for _, c := range got {
				tm := at(t, time.UTC, c)
				if s.Open(tm) == s.Open(tm.Add(-time.Nanosecond)) {
					t.Errorf("Open does not change at %s UTC", c)
				}
			}
			if got := s.Overlap(from, to); got != tt.overlap {
				t.Errorf("Overlap = %v, want %v", got, tt.overlap)
			}
		})
	}
}

// TestSchedule_Next_matchesOpen scans a year minute by minute in zones with and without
// daylight saving, and checks that Next finds every change of Open and only those.
func TestSchedule_Next_matchesOpen(t *testing.T) {
	if testing.Short() {
		t.Skip("scans a year minute by minute")
	}
	for _, zone := range []string{"Europe/Berlin", "America/New_York", "America/Santiago", "UTC"} {
		s := mustParse(t, "mon-fri 08:00-18:00, 22:30-01:00; sun 02:15-02:45, 00:00-00:30; sat 23:30-02:30", mustLoad(t, zone))
		cur := time.Date(2024, 1, 1, 0, 0, 30, 0, time.UTC)
		next := s.Next(cur)
		open := s.Open(cur)
		for end := cur.AddDate(1, 0, 0); cur.Before(end); cur = cur.Add(time.Minute) {
			if o := s.Open(cur); o != open {
				// Changes are on whole minutes of UTC in these zones.
				if want := cur.Truncate(time.Minute); !next.Equal(want) {
					t.Fatalf("%s: Open changes at %v, but Next said %v", zone, want, next)
				}
				open, next = o, s.Next(cur)
			}
		}
	}
}
