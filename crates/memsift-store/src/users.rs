//! Users' billing tiers: where a user's `{purpose}_{tier}` route comes from by default.

use memsift_core::UserId;

use crate::tx::sql;
use crate::{Result, Store};

impl Store {
    /// The user's billing tier column (`None`: the configured default applies).
    pub async fn user_billing_tier(&self, user_id: UserId) -> Result<Option<String>> {
        let tier: Option<Option<String>> = self
            .read_scalar_optional(sql!("SELECT billing_tier FROM users WHERE id = $1", user_id))
            .await?;
        Ok(tier.flatten())
    }
}
