// Package support serves support staff: a read-only JSON API under
// /api/v1/ and a small web page under /ui/, both over the verdict store.
//
// Every /api/v1/ call needs "Authorization: Bearer <token>". The page's
// files are public (they hold no data); the page asks for the token, keeps it
// in the tab's sessionStorage and sends it with each data call.
package support
