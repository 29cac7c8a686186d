//! Admin sessions: the API token, sent once from the sign-in form, is exchanged for an
//! HMAC-signed, expiring cookie, so no token ever travels in a URL.
//!
//! The cookie is `v1.<expiry, unix seconds>.<nonce>.<HMAC-SHA256 of the three>`, keyed by a key
//! derived from the API token. Nothing is stored on the server: every daemon sharing one
//! database (and so one token) accepts every other daemon's cookies, a restart keeps sessions,
//! and rotating the token ends them all. The price is that one session cannot be revoked alone;
//! it ends when its expiry passes ([`SESSION_HOURS`]) or the token changes.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use rand::RngCore;
use secrecy::{ExposeSecret, SecretBox};
use sha2::Sha256;

use crate::token::ApiToken;

/// The cookie's name.
pub const SESSION_COOKIE: &str = "memsift_admin";
/// How long a session lasts: a working day.
pub const SESSION_HOURS: i64 = 8;
/// The version tag every cookie starts with; a new format gets a new tag.
const VERSION: &str = "v1";
/// What the session key is derived for: a key for another purpose uses another label.
const KEY_LABEL: &[u8] = b"memsift admin session key v1";

/// Signs and checks session cookies with a key derived from the API token.
#[derive(Clone)]
pub struct SessionKeys(Arc<SecretBox<[u8; 32]>>);

impl SessionKeys {
    /// The keys of `token`'s sessions.
    pub fn new(token: &ApiToken) -> SessionKeys {
        SessionKeys(Arc::new(SecretBox::new(Box::new(token.derive_key(KEY_LABEL)))))
    }

    fn mac(&self) -> Hmac<Sha256> {
        <Hmac<Sha256> as Mac>::new_from_slice(self.0.expose_secret()).expect("HMAC takes a key of any length")
    }

    /// A new session's cookie value, valid until `now` plus [`SESSION_HOURS`].
    pub fn issue(&self, now: DateTime<Utc>) -> String {
        let expires = (now + chrono::Duration::hours(SESSION_HOURS)).timestamp();
        let mut nonce = [0u8; 16];
        rand::rng().fill_bytes(&mut nonce);
        let claims = format!("{VERSION}.{expires}.{}", URL_SAFE_NO_PAD.encode(nonce));
        let mut mac = self.mac();
        mac.update(claims.as_bytes());
        format!("{claims}.{}", URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()))
    }

    /// Whether `value` is a cookie these keys signed that has not expired at `now`.
    pub fn verify(&self, value: &str, now: DateTime<Utc>) -> bool {
        let Some((claims, signature)) = value.rsplit_once('.') else {
            return false;
        };
        let Ok(signature) = URL_SAFE_NO_PAD.decode(signature) else {
            return false;
        };
        let mut mac = self.mac();
        mac.update(claims.as_bytes());
        // Constant time, so the response time does not reveal how much of a guess was right.
        if mac.verify_slice(&signature).is_err() {
            return false;
        }
        let mut fields = claims.split('.');
        let (Some(VERSION), Some(expires), Some(_nonce), None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return false;
        };
        expires.parse::<i64>().is_ok_and(|expires| now.timestamp() < expires)
    }
}

/// The `Set-Cookie` value that starts a session: script cannot read it, no other site's page can
/// make the browser send it, and it goes only to the admin pages. `Secure` is added when a TLS
/// proxy says the browser came over HTTPS (memsift itself serves plain HTTP).
pub fn start_cookie(value: &str, over_https: bool) -> String {
    format!(
        "{SESSION_COOKIE}={value}; Path=/admin; Max-Age={}; HttpOnly; SameSite=Strict{}",
        SESSION_HOURS * 3600,
        if over_https { "; Secure" } else { "" }
    )
}

/// The `Set-Cookie` value that ends the session in this browser.
pub fn end_cookie() -> String {
    format!("{SESSION_COOKIE}=; Path=/admin; Max-Age=0; HttpOnly; SameSite=Strict")
}

/// The session cookie's value among a request's `Cookie` headers, if there is one.
pub fn cookie_value(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|header| header.to_str().ok())
        .flat_map(|header| header.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == SESSION_COOKIE)
        .map(|(_, value)| value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(token: &str) -> SessionKeys {
        SessionKeys::new(&ApiToken::new(token).unwrap())
    }

    const TOKEN: &str = "7c0e9a4b1f3d5e2a8b6c4d0f9e1a3b5c";

    #[test]
    fn a_cookie_holds_until_its_expiry_and_only_under_the_token_that_signed_it() {
        let now = DateTime::from_timestamp(1_780_000_000, 0).unwrap();
        let cookie = keys(TOKEN).issue(now);
        assert!(!cookie.contains(TOKEN));
        // Another daemon with the same token accepts it; a daemon with another token does not.
        assert!(keys(TOKEN).verify(&cookie, now));
        assert!(!keys("e4d2b9a7c5f3e1d0b8a6c4f2e0d9b7a5").verify(&cookie, now));
        let last_second = now + chrono::Duration::hours(SESSION_HOURS) - chrono::Duration::seconds(1);
        assert!(keys(TOKEN).verify(&cookie, last_second));
        assert!(!keys(TOKEN).verify(&cookie, last_second + chrono::Duration::seconds(1)));
    }

    #[test]
    fn any_change_to_a_cookie_voids_it() {
        let now = DateTime::from_timestamp(1_780_000_000, 0).unwrap();
        let keys = keys(TOKEN);
        let cookie = keys.issue(now);
        for at in 0..cookie.len() {
            let mut altered = cookie.clone().into_bytes();
            altered[at] = if altered[at] == b'A' { b'B' } else { b'A' };
            let altered = String::from_utf8(altered).unwrap();
            assert!(!keys.verify(&altered, now), "byte {at}: {altered}");
        }
        // A later expiry with the old signature is refused.
        let (claims, signature) = cookie.rsplit_once('.').unwrap();
        let mut fields: Vec<&str> = claims.split('.').collect();
        let later = (now.timestamp() + 365 * 86_400).to_string();
        fields[1] = &later;
        assert!(!keys.verify(&format!("{}.{signature}", fields.join(".")), now));
        assert!(!keys.verify("", now));
        assert!(!keys.verify("v1.1.2.3.4", now));
    }
}
