//! Provider clients (Anthropic, OpenAI, OpenAI-compatible). Filled by the provider-clients issue.

#![deny(missing_docs)]
