package console

import (
	"testing"

	"github.com/shareai/shareai/internal/store"
)

// A download is saved under the file's own name, never a path, encoded when it is not ASCII,
// and never breaking the header; a file with no name is saved under its id.
func TestAttachment(t *testing.T) {
	tests := []struct{ filename, want string }{
		{"input.jsonl", `attachment; filename=input.jsonl`},
		{"my data.jsonl", `attachment; filename="my data.jsonl"`},
		{`a"b.jsonl`, `attachment; filename="a\"b.jsonl"`},
		{"داده.jsonl", `attachment; filename*=utf-8''%D8%AF%D8%A7%D8%AF%D9%87.jsonl`},
		{"../../etc/passwd", `attachment; filename=passwd`},
		{`C:\data\in.jsonl`, `attachment; filename=in.jsonl`},
		{"a\r\nSet-Cookie: x=1", `attachment; filename*=utf-8''a%0D%0ASet-Cookie%3A%20x%3D1`},
		{"", `attachment; filename=file-X.jsonl`},
		{"dir/", `attachment; filename=file-X.jsonl`},
	}
	for _, tt := range tests {
		if got := attachment(&store.File{ID: "file-X", Filename: tt.filename}); got != tt.want {
			t.Errorf("attachment(%q) = %q, want %q", tt.filename, got, tt.want)
		}
	}
}

// A batch's output and error files, and inputs named .jsonl, are JSONL; anything else is bytes.
func TestFileType(t *testing.T) {
	tests := []struct {
		purpose, filename, want string
	}{
		{store.PurposeBatchOutput, "batch_1_output.jsonl", "application/jsonl"},
		{store.PurposeBatchOutput, "", "application/jsonl"},
		{store.PurposeBatch, "input.JSONL", "application/jsonl"},
		{store.PurposeBatch, "input.txt", "application/octet-stream"},
		{store.PurposeBatch, "page.html", "application/octet-stream"},
	}
	for _, tt := range tests {
		if got := fileType(&store.File{Purpose: tt.purpose, Filename: tt.filename}); got != tt.want {
			t.Errorf("fileType(%s, %q) = %q, want %q", tt.purpose, tt.filename, got, tt.want)
		}
	}
}
