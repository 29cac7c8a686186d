//! The per-install secret that keys what erasure keeps: after `memsift erase`, the store holds only
//! HMAC-SHA256 fingerprints of the erased user and of each erased fact, never their text.
//!
//! A plain hash would not do: an erased fact is short, normalised text ("the user works as a nurse
//! in porto"), so anyone with the database could confirm a guess by hashing it. With a key kept
//! outside the database, the fingerprints say nothing to a reader of the database alone.
//!
//! The key must travel with the database: every daemon sharing a PostgreSQL needs the same key,
//! and a backup restored without its key would let erased facts be stored again. The store records
//! a check value of the key on first use and refuses a different one, so a wrong key stops the
//! daemon at start-up instead of quietly weakening erasure.

use hmac::{Hmac, Mac};
use rand::RngCore;
use secrecy::{ExposeSecret, SecretBox};
use sha2::Sha256;

use crate::{Result, StoreError};

/// The key, held in a `secrecy` box so it never reaches a log or a `Debug` print.
pub struct ErasureKey(SecretBox<[u8; 32]>);

impl std::fmt::Debug for ErasureKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ErasureKey(***)")
    }
}

impl ErasureKey {
    /// A new random key (for a new install, or a test store).
    pub fn generate() -> ErasureKey {
        let mut bytes = [0_u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        ErasureKey(SecretBox::new(Box::new(bytes)))
    }

    /// Reads a key written by [`ErasureKey::to_hex`] (64 hex digits; surrounding whitespace ignored).
    pub fn from_hex(text: &str) -> Result<ErasureKey> {
        let text = text.trim();
        let invalid = || {
            StoreError::Invalid(
                "the erasure key must be 64 hex digits (32 bytes), as memsift writes it; restore the key file from the backup taken with the database"
                    .to_owned(),
            )
        };
        if text.len() != 64 || !text.is_ascii() {
            return Err(invalid());
        }
        let mut bytes = [0_u8; 32];
        for (index, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&text[index * 2..index * 2 + 2], 16).map_err(|_| invalid())?;
        }
        Ok(ErasureKey(SecretBox::new(Box::new(bytes))))
    }

    /// The key as 64 hex digits, for the key file.
    pub fn to_hex(&self) -> String {
        self.0
            .expose_secret()
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect()
    }

    fn mac(&self, domain: &str, text: &str) -> String {
        // A 32-byte key is always a valid HMAC key.
        let mut mac = Hmac::<Sha256>::new_from_slice(self.0.expose_secret()).expect("HMAC takes any key length");
        // The domain keeps a user's fingerprint from ever equalling a fact's.
        mac.update(domain.as_bytes());
        mac.update(&[0]);
        mac.update(text.as_bytes());
        mac.finalize()
            .into_bytes()
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect()
    }

    /// The fingerprint of a user's external id: erased facts belong to it, so they stay erased when
    /// the same user is imported again, although the user row no longer holds the id.
    pub(crate) fn user_key(&self, external_id: &str) -> String {
        self.mac("user", external_id)
    }

    /// The fingerprint of a fact's normalised text (its `dedupe_key`).
    pub(crate) fn fact(&self, dedupe_key: &str) -> String {
        self.mac("fact", dedupe_key)
    }

    /// A value that tells this key from any other, stored once per database.
    pub(crate) fn check_value(&self) -> String {
        self.mac("check", "memsift erasure key")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_round_trips_and_its_fingerprints_are_keyed_and_separated_by_domain() {
        let key = ErasureKey::generate();
        let again = ErasureKey::from_hex(&key.to_hex()).unwrap();
        assert_eq!(
            key.fact("the user works as a nurse"),
            again.fact("the user works as a nurse")
        );
        let other = ErasureKey::generate();
        assert_ne!(
            key.fact("the user works as a nurse"),
            other.fact("the user works as a nurse")
        );
        assert_ne!(key.user_key("ana"), key.fact("ana"));
        assert!(!key.fact("the user works as a nurse").contains("nurse"));
        assert_eq!(format!("{key:?}"), "ErasureKey(***)");
        assert!(ErasureKey::from_hex("not hex").is_err());
        assert!(ErasureKey::from_hex(&"g".repeat(64)).is_err());
    }
}
