package mcp

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/troupe-dev/troupe/internal/llm"
)

// TestConvertImages: an image the model can take goes to it, base64; one
// of another type or too large is only named in the text.
func TestConvertImages(t *testing.T) {
	t.Parallel()
	big := bytes.Repeat([]byte{1}, MaxImageBytes+1)
	tests := []struct {
		name   string
		img    *sdk.ImageContent
		text   string
		images []llm.Image
	}{
		{"jpeg", &sdk.ImageContent{MIMEType: "image/jpeg", Data: []byte("jpg")},
			"[image 1: image/jpeg, 3 bytes]", []llm.Image{{MediaType: "image/jpeg", Data: "anBn"}}},
		{"svg", &sdk.ImageContent{MIMEType: "image/svg+xml", Data: []byte("<svg/>")},
			"[image 1: image/svg+xml, 6 bytes, not shown: the model takes only JPEG, PNG, GIF and WebP]", nil},
		{"too large", &sdk.ImageContent{MIMEType: "image/png", Data: big},
			"[image 1: image/png, 3750001 bytes, not shown: larger than 3750000 bytes]", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := ConvertResult(&sdk.CallToolResult{Content: []sdk.Content{tt.img}})
			if res.Content != tt.text {
				t.Errorf("text = %q, want %q", res.Content, tt.text)
			}
			if diff := cmp.Diff(tt.images, res.Images); diff != "" {
				t.Errorf("images (-want +got):\n%s", diff)
			}
		})
	}
}
