//! Shared setup: a sim with a scripted responder and a manual clock, and clients wired to it.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use memsift_core::ManualClock;
use memsift_core::contract::Turn;
use memsift_core::status::Role;
use memsift_core::transcript::render_turns;
use memsift_llm::anthropic::{BatchRequest, InputMessage, MessageParams, SystemBlock};
use memsift_llm::{AnthropicClient, ClientOptions, OpenAiClient, RateLimiter, RetryPolicy, VirtualTimekeeper};
use memsift_sim::{FaultConfig, ScriptedResponder, Sim, SimConfig, SimHandle};
use secrecy::SecretString;

pub const KEY: &str = "sk-test-contract-key";

pub struct Harness {
    pub sim: SimHandle,
    pub clock: ManualClock,
    pub time: Arc<VirtualTimekeeper>,
    pub limiter: RateLimiter,
}

pub fn start_time() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2026-06-01T12:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

/// A sim answering with `script`, faults as given, on a manual clock; clients use virtual time.
pub async fn harness_with(faults: FaultConfig, script: ScriptedResponder) -> Harness {
    let clock = ManualClock::new(start_time());
    let config = SimConfig::new(Arc::new(script))
        .with_faults(faults)
        .with_clock(Arc::new(clock.clone()))
        .with_api_key(KEY);
    let sim = Sim::start(config).await.unwrap();
    let time = VirtualTimekeeper::new();
    let limiter = RateLimiter::new(time.clone(), None);
    Harness {
        sim,
        clock,
        time,
        limiter,
    }
}

/// A sim whose model always answers `text`.
pub async fn harness(faults: FaultConfig, text: &'static str) -> Harness {
    harness_with(
        faults,
        ScriptedResponder::from_fn(move |_| memsift_sim::ResponderReply::Text(text.to_owned())),
    )
    .await
}

impl Harness {
    pub fn options(&self, base_url: String, model: &str) -> ClientOptions {
        ClientOptions {
            base_url: Some(base_url),
            api_key: Some(SecretString::from(KEY)),
            model: model.to_owned(),
            request_timeout: Duration::from_secs(10),
            download_timeout: Duration::from_secs(10),
            read_limits: memsift_llm::ReadLimits::default(),
            retry: RetryPolicy {
                max_retries: 3,
                jitter: false,
                timekeeper: self.time.clone(),
                ..RetryPolicy::default()
            },
            limiter: self.limiter.clone(),
        }
    }

    pub fn anthropic(&self) -> AnthropicClient {
        AnthropicClient::new(self.options(self.sim.base_url.clone(), "claude-haiku-4-5")).unwrap()
    }

    pub fn openai(&self) -> OpenAiClient {
        OpenAiClient::new(self.options(self.sim.openai_base_url(), "gpt-4o-mini")).unwrap()
    }
}

pub fn transcript() -> String {
    let at = start_time();
    render_turns(&[
        Turn {
            label: "D1:1".into(),
            role: Role::User,
            speaker: Some("Ana".into()),
            content: "I adopted a dog named Rex.".into(),
            at,
        },
        Turn {
            label: "D1:2".into(),
            role: Role::Assistant,
            speaker: None,
            content: "Congratulations!".into(),
            at,
        },
    ])
}

/// A system prompt of about `words` o200k tokens ("You extract memories." is four).
pub fn system_prompt(words: usize) -> String {
    "You extract memories. ".repeat(words.div_ceil(4))
}

/// A Messages body for `model` whose system prompt is marked cacheable for an hour.
pub fn params_with(model: &str, system: String, max_tokens: u32) -> MessageParams {
    MessageParams {
        model: model.into(),
        max_tokens,
        system: vec![SystemBlock {
            text: system,
            cache_control: Some(memsift_llm::anthropic::CacheControl {
                ttl: memsift_llm::anthropic::CacheTtl::OneHour,
            }),
        }],
        messages: vec![InputMessage::user(transcript())],
        temperature: None,
        thinking: None,
    }
}

/// A Haiku 4.5 body with a short system prompt marked cacheable (below Haiku's minimum).
pub fn params(max_tokens: u32) -> MessageParams {
    params_with("claude-haiku-4-5", system_prompt(80), max_tokens)
}

pub fn requests(count: usize) -> Vec<BatchRequest> {
    (0..count)
        .map(|n| BatchRequest {
            custom_id: format!("req-{n}"),
            params: params(1024),
        })
        .collect()
}
