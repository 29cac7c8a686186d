//! Where a user's billing tier comes from.

/// Decides a user's billing tier; the tier is the second half of the `{purpose}_{tier}` key.
pub trait BillingBackend: Send + Sync {
    /// The tier of a user whose `users.billing_tier` column holds `user_tier_column`.
    fn tier_of(&self, user_tier_column: Option<&str>) -> String;
}

/// The default backend: the `users.billing_tier` column when set, else the configured default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColumnBilling {
    /// `billing.default_tier`.
    pub default_tier: String,
}

impl BillingBackend for ColumnBilling {
    fn tier_of(&self, user_tier_column: Option<&str>) -> String {
        match user_tier_column.map(str::trim) {
            Some(tier) if !tier.is_empty() => tier.to_owned(),
            _ => self.default_tier.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_column_wins_and_blank_means_the_default() {
        let billing = ColumnBilling {
            default_tier: "standard".into(),
        };
        let cases = [
            (None, "standard"),
            (Some(""), "standard"),
            (Some(" premium "), "premium"),
        ];
        for (column, tier) in cases {
            assert_eq!(billing.tier_of(column), tier, "{column:?}");
        }
    }
}
