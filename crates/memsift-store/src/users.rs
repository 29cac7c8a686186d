//! Users' billing tiers: where a user's `{purpose}_{tier}` route comes from by default.

use memsift_core::UserId;

use crate::{Result, Store, on_pool};

impl Store {
    /// The user's billing tier column (`None`: the configured default applies).
    pub async fn user_billing_tier(&self, user_id: UserId) -> Result<Option<String>> {
        let tier: Option<Option<String>> = on_pool!(self, |pool| {
            sqlx::query_scalar("SELECT billing_tier FROM users WHERE id = $1")
                .bind(user_id.to_string())
                .fetch_optional(pool)
                .await?
        });
        Ok(tier.flatten())
    }

    /// Sets a user's billing tier (`None`: the configured default); returns whether the user exists.
    pub async fn set_user_billing_tier(&self, user_external_id: &str, tier: Option<&str>) -> Result<bool> {
        let updated = on_pool!(self, |pool| {
            sqlx::query("UPDATE users SET billing_tier = $2 WHERE external_id = $1")
                .bind(user_external_id)
                .bind(tier)
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(updated == 1)
    }
}
