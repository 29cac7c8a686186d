//! Users: their billing tiers, and the row lock that makes ingest, apply, planning and erasure of
//! one user take turns.
//!
//! Every write transaction that adds a user's data takes the user's row lock first (an `UPDATE`
//! of the row, which locks it on PostgreSQL; SQLite already runs one writer at a time) and checks
//! that the user is live. Erasure takes the same lock first and renames the row, so on either
//! backend a write that began before an erasure finishes before it (and is erased with the rest),
//! and a write that would land after it finds the user erased and adds nothing. Taking the user's
//! lock before any other row of theirs keeps the order the same everywhere, so none of these
//! transactions can deadlock against an erasure.

use chrono::{DateTime, Utc};
use memsift_core::UserId;
use memsift_core::message::ERASED_USER_PREFIX;

use crate::handles::Users;
use crate::tx::{WriteTx, sql};
use crate::{Result, StoreError, corrupt};

impl Users<'_> {
    /// The user's billing tier column (`None`: the configured default applies).
    pub async fn user_billing_tier(self, user_id: UserId) -> Result<Option<String>> {
        let tier: Option<Option<String>> = self
            .read_scalar_optional(sql!("SELECT billing_tier FROM users WHERE id = $1", user_id))
            .await?;
        Ok(tier.flatten())
    }
}

/// The `LIKE` pattern of erased users' external ids.
pub(crate) fn erased_pattern() -> String {
    format!("{ERASED_USER_PREFIX}%")
}

impl WriteTx {
    /// Finds or creates the live user `external_id` (canonical) and holds its row lock until the
    /// transaction ends. Returns the id and whether this call created the user.
    pub(crate) async fn lock_or_create_user(
        &mut self,
        external_id: &str,
        now: DateTime<Utc>,
    ) -> Result<(UserId, bool)> {
        // An erasure committing between the insert and the update renames the row: the next
        // insert then makes the new user the erasure left room for. Two rounds settle it.
        for _ in 0..3 {
            let created: Option<String> = self
                .scalar_optional(sql!(
                    "INSERT INTO users (id, external_id, created_at) VALUES ($1, $2, $3)
                     ON CONFLICT (external_id) DO NOTHING RETURNING id",
                    UserId::new_v7(),
                    external_id,
                    now
                ))
                .await?;
            if let Some(id) = created {
                return Ok((UserId::parse(&id).map_err(|error| corrupt("users", error))?, true));
            }
            let locked: Option<String> = self
                .scalar_optional(sql!(
                    "UPDATE users SET memory_version = memory_version WHERE external_id = $1 RETURNING id",
                    external_id
                ))
                .await?;
            if let Some(id) = locked {
                return Ok((UserId::parse(&id).map_err(|error| corrupt("users", error))?, false));
            }
        }
        Err(StoreError::Invalid(format!(
            "user `{external_id}` is being erased and created at once; send the messages again"
        )))
    }

    /// Takes the row lock of `user_id` and says whether the user is live; `false` means the user
    /// was erased, so nothing may be written for them.
    pub(crate) async fn lock_live_user(&mut self, user_id: UserId) -> Result<bool> {
        let locked = self
            .execute(sql!(
                "UPDATE users SET memory_version = memory_version WHERE id = $1 AND external_id NOT LIKE $2",
                user_id,
                erased_pattern()
            ))
            .await?;
        Ok(locked == 1)
    }

    /// Takes the row lock of the user named by `user` (its id, or with `by_external_id` its
    /// external id), erased or not: for writes that change memories they already have (scoring,
    /// revisions, undo, re-embedding), so that they too take the user's lock before the memory
    /// rows, as the database's stamp triggers (migration 0023) and every other writer do.
    pub(crate) async fn lock_user(&mut self, user: &str, by_external_id: bool) -> Result<()> {
        if by_external_id {
            self.execute(sql!(
                "UPDATE users SET memory_version = memory_version WHERE external_id = $1",
                user
            ))
            .await?;
        } else {
            self.execute(sql!(
                "UPDATE users SET memory_version = memory_version WHERE id = $1",
                user
            ))
            .await?;
        }
        Ok(())
    }
}
