package matcher

import (
	"strings"
	"testing"
)

func TestRegions(t *testing.T) {
	if n := len(strings.Fields(countries)); n != 249 {
		t.Errorf("%d country codes; want ISO 3166-1's 249", n)
	}
	for name, codes := range groups {
		for _, c := range strings.Fields(codes) {
			if !IsCountry(c) {
				t.Errorf("group %s holds %q, not a country code", name, c)
			}
		}
	}
	if n := len(strings.Fields(groups["eu"])); n != 27 {
		t.Errorf("eu has %d members; want 27", n)
	}
	tests := []struct {
		names   []string
		in, out []string
	}{
		{[]string{"eu"}, []string{"de", "fr", "ie", "cy", "DE"}, []string{"gb", "ch", "no", "us", "re", "", "d", "deu"}},
		{[]string{"us"}, []string{"us"}, []string{"ca", "pr", "mx"}},
		{[]string{"asia"}, []string{"jp", "in", "sg", "tw", "ae"}, []string{"au", "ru", "eg"}},
		{[]string{"ch", "GB"}, []string{"ch", "gb"}, []string{"de"}},
		{[]string{"xx", "europe"}, nil, []string{"de", "xx"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.names, ","), func(t *testing.T) {
			s := allowed(tt.names)
			for _, c := range tt.in {
				if !s.contains(c) {
					t.Errorf("%q outside %v; want inside", c, tt.names)
				}
			}
			for _, c := range tt.out {
				if s.contains(c) {
					t.Errorf("%q inside %v; want outside", c, tt.names)
				}
			}
		})
	}
}
