//! The protocol-faithful local provider. Filled by the provider-clients issue.

#![deny(missing_docs)]
