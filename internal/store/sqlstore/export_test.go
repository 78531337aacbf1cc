package sqlstore

import "time"

// SetNow sets the clock that the store reads where a method is given no time (SetCap), for
// the external tests.
func SetNow(db *DB, now func() time.Time) { db.now = now }
