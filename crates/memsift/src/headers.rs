//! The security headers every answer of the HTTP server carries, API and admin pages alike.

use axum::http::header;

/// The headers every response of the server carries, with the page's `Content-Security-Policy`:
/// nothing is cached (answers hold people's memories), nothing may frame it, no address leaks
/// in a `Referer`, and no body is sniffed into another type.
pub fn set_security_headers(headers: &mut header::HeaderMap, content_security_policy: header::HeaderValue) {
    use header::HeaderValue;
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::CONTENT_SECURITY_POLICY, content_security_policy);
}
