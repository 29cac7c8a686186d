//! Provider clients for memsift's LLM lanes: Anthropic Messages and Message Batches, OpenAI
//! chat, Files and Batches, and any OpenAI-compatible chat or embeddings server.
//!
//! Every call goes through one shared [`RateLimiter`] and one [`RetryPolicy`], and fails with an
//! [`LlmError`] whose variant says what the caller must do. Batch create and file upload are never
//! retried: they return a [`CreateOutcome`] so the coordinator can reconcile an unknown outcome
//! instead of creating a duplicate batch.

#![deny(missing_docs)]

pub mod anthropic;
pub mod error;
pub mod fault;
pub mod health;
mod http;
pub mod jsonl;
pub mod openai;
pub mod params;
pub mod ratelimit;
pub mod retry;
pub mod secret;
pub mod usage;

pub use anthropic::AnthropicClient;
pub use error::{Detail, LlmError, MAX_DETAIL_CHARS};
pub use fault::{Call, FaultClass, ProviderFault};
pub use health::{BreakerPolicy, BreakerState, HealthBoard, HealthSignal, LaneKey, OpenCause, Permit, Transition};
pub use http::{ClientOptions, CreateOutcome, install_crypto_provider};
pub use jsonl::{JsonLines, LineSplitter, LineTooLong, ReadLimits};
pub use openai::OpenAiClient;
pub use params::{
    LlmConfigError, MIN_OUTPUT_ALLOWANCE, PrefixReuse, ResolvedLlm, build_batch_params, build_chat_request, cache_pays,
    cache_warnings, system_cache, validate_custom_id, validate_llm_config,
};
pub use ratelimit::{KeyQuota, LimitKey, RateLimiter};
pub use retry::{RetryMode, RetryPolicy, Timekeeper, TokioTimekeeper, VirtualTimekeeper};
pub use secret::{KeyError, key_from_env, key_from_file, load_api_key};
pub use usage::{ModelPrice, PriceTable, TokenUsage, cost};
