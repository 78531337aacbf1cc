package matcher

import "strings"

// countries are the 249 officially assigned ISO 3166-1 alpha-2 codes, in lower case.
const countries = "" +
	"ad ae af ag ai al am ao aq ar as at au aw ax az " +
	"ba bb bd be bf bg bh bi bj bl bm bn bo bq br bs bt bv bw by bz " +
	"ca cc cd cf cg ch ci ck cl cm cn co cr cu cv cw cx cy cz " +
	"de dj dk dm do dz " +
	"ec ee eg eh er es et " +
	"fi fj fk fm fo fr " +
	"ga gb gd ge gf gg gh gi gl gm gn gp gq gr gs gt gu gw gy " +
	"hk hm hn hr ht hu " +
	"id ie il im in io iq ir is it " +
	"je jm jo jp " +
	"ke kg kh ki km kn kp kr kw ky kz " +
	"la lb lc li lk lr ls lt lu lv ly " +
	"ma mc md me mf mg mh mk ml mm mn mo mp mq mr ms mt mu mv mw mx my mz " +
	"na nc ne nf ng ni nl no np nr nu nz " +
	"om " +
	"pa pe pf pg ph pk pl pm pn pr ps pt pw py " +
	"qa " +
	"re ro rs ru rw " +
	"sa sb sc sd se sg sh si sj sk sl sm sn so sr ss st sv sx sy sz " +
	"tc td tf tg th tj tk tl tm tn to tr tt tv tw tz " +
	"ua ug um us uy uz " +
	"va vc ve vg vi vn vu " +
	"wf ws " +
	"ye yt " +
	"za zm zw"

// groups name sets of countries a buyer may allow at once. They are strict: a group holds only
// countries wholly inside it, so a residency rule is never wider than its name says.
//   - eu: the 27 member states of the European Union. Outermost regions with their own codes
//     (gf, gp, mq, re, yt, mf) and Åland (ax) are not included: list them to allow them.
//   - us: the United States; territories with their own codes (pr, gu, vi, as, mp, um) are not
//     included.
//   - asia: the UN M49 region Asia (Central, Eastern, South-eastern, Southern and Western Asia,
//     so cy is in both eu and asia), plus tw.
var groups = map[string]string{
	"eu": "at be bg cy cz de dk ee es fi fr gr hr hu ie it lt lu lv mt nl pl pt ro se si sk",
	"us": "us",
	"asia": "kz kg tj tm uz " + // Central
		"cn hk jp kp kr mn mo tw " + // Eastern
		"bn id kh la mm my ph sg th tl vn " + // South-eastern
		"af bd bt in ir lk mv np pk " + // Southern
		"ae am az bh cy ge il iq jo kw lb om ps qa sa sy tr ye", // Western
}

// known is the set of country codes.
var known = setOf(countries)

// groupSets holds each group's countries as a set.
var groupSets = func() map[string]regionSet {
	m := make(map[string]regionSet, len(groups))
	for name, codes := range groups {
		m[name] = setOf(codes)
	}
	return m
}()

func setOf(codes string) regionSet {
	var s regionSet
	for _, c := range strings.Fields(codes) {
		s.add(c)
	}
	return s
}

// IsCountry reports whether code is an ISO 3166-1 alpha-2 country code, in either case.
func IsCountry(code string) bool {
	i := regionIndex(code)
	return i >= 0 && known.has(i)
}

// country returns code in lower case if it is a country code, else "" (unknown).
func country(code string) string {
	if !IsCountry(code) {
		return ""
	}
	return strings.ToLower(code)
}

// isRegionName reports whether name, in lower case, is a country code or a group.
func isRegionName(name string) bool {
	_, ok := groups[name]
	return ok || (name == strings.ToLower(name) && IsCountry(name))
}

// regionSet is a set of country codes, one bit per pair of letters: no allocation.
type regionSet [(26*26 + 63) / 64]uint64

// regionIndex maps a two-letter code, either case, to 0..675, or -1.
func regionIndex(code string) int {
	if len(code) != 2 {
		return -1
	}
	a, b := code[0]|0x20, code[1]|0x20 // ASCII lower case
	if a < 'a' || a > 'z' || b < 'a' || b > 'z' {
		return -1
	}
	return int(a-'a')*26 + int(b-'a')
}

func (s *regionSet) add(code string) {
	if i := regionIndex(code); i >= 0 {
		s[i/64] |= 1 << (i % 64)
	}
}

func (s *regionSet) has(i int) bool { return s[i/64]&(1<<(i%64)) != 0 }

// allowed returns the countries the names allow: codes and groups, either case. Unknown names
// allow nothing.
func allowed(names []string) regionSet {
	var s regionSet
	for _, n := range names {
		if g, ok := groupSets[strings.ToLower(n)]; ok {
			for i := range s {
				s[i] |= g[i]
			}
		} else if IsCountry(n) {
			s.add(n)
		}
	}
	return s
}

// contains reports whether the country code is in s; "" (unknown) never is.
func (s *regionSet) contains(code string) bool {
	i := regionIndex(code)
	return i >= 0 && s.has(i)
}
