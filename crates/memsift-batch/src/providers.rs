//! The two batch APIs behind [`BatchProvider`]: Anthropic Message Batches and OpenAI Files + Batches.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{Duration, TimeZone, Utc};
use futures_util::StreamExt;
use memsift_core::BatchId;
use memsift_core::status::RequestStatus;
use memsift_llm::anthropic::{BatchRequest, BatchResult, CacheTtl, InputMessage, ProcessingStatus};
use memsift_llm::openai::{BATCH_UUID_METADATA_KEY, BatchInputLine, BatchOutputLine, ResultFile};
use memsift_llm::{
    AnthropicClient, Call, CreateOutcome, LlmError, OpenAiClient, PrefixReuse, PriceTable, ProviderFault, ResolvedLlm,
    TokenUsage,
};
use memsift_store::{BatchRow, RequestUsage, WorkRequest};

use crate::{BatchProvider, ProviderCreate, ProviderPoll, ResultLine, ResultStream};

/// How far around the intent's commit time a provider batch may have been created (clock skew
/// between us and the provider, plus the create call's own duration).
const CLOCK_SKEW: Duration = Duration::minutes(5);

/// How a definite create rejection maps onto the coordinator's choices: a setting fault pauses the
/// lane; a rate limit, an overload or a server that never received the call may accept the same
/// batch later.
fn rejected(error: LlmError, llm: &ResolvedLlm) -> ProviderCreate {
    let retry_after = match &error {
        LlmError::RateLimited { retry_after, .. } | LlmError::Overloaded { retry_after, .. } => Some(
            retry_after
                .and_then(|wait| Duration::from_std(wait).ok())
                .unwrap_or(Duration::seconds(30)),
        ),
        LlmError::Transient { .. } => Some(Duration::seconds(30)),
        _ => None,
    };
    ProviderCreate::Rejected {
        fault: ProviderFault::classify(error, Call::Create, llm),
        retry_after,
    }
}

/// A create whose outcome is unknown: an outage of the lane until the reconciler knows more.
fn unknown(error: LlmError, llm: &ResolvedLlm) -> ProviderCreate {
    ProviderCreate::Unknown(ProviderFault::classify(error, Call::Create, llm))
}

fn usage_of(tokens: &TokenUsage, model: &str, prices: &PriceTable) -> RequestUsage {
    RequestUsage {
        input_tokens: tokens.input_tokens as i64,
        output_tokens: tokens.output_tokens as i64,
        cache_creation_tokens: (tokens.cache_creation_5m_tokens + tokens.cache_creation_1h_tokens) as i64,
        cache_read_tokens: tokens.cache_read_tokens as i64,
        cost_usd: prices
            .price(model)
            .map(|price| memsift_llm::cost(tokens, price, true))
            .unwrap_or(0.0),
    }
}

/// What both providers share: classifying their client's errors against their section.
macro_rules! provider_helpers {
    ($provider:ty) => {
        impl $provider {
            fn fault(&self, error: LlmError, call: Call) -> ProviderFault {
                ProviderFault::classify(error, call, &self.llm)
            }

            fn provider_batch_id<'a>(&self, batch: &'a BatchRow) -> Result<&'a str, ProviderFault> {
                batch.provider_batch_id.as_deref().ok_or_else(|| {
                    self.fault(
                        LlmError::Usage {
                            provider: self.kind(),
                            detail: format!("batch {} has no provider id yet", batch.id).into(),
                        },
                        Call::Cleanup,
                    )
                })
            }
        }
    };
}

provider_helpers!(AnthropicBatchProvider);
provider_helpers!(OpenAiBatchProvider);

/// Anthropic Message Batches for one `{purpose}_{tier}` config.
pub struct AnthropicBatchProvider {
    client: AnthropicClient,
    llm: ResolvedLlm,
    prices: PriceTable,
}

impl AnthropicBatchProvider {
    /// A provider sending with `client`, building params from `llm`, pricing with `prices`.
    pub fn new(client: AnthropicClient, llm: ResolvedLlm, prices: PriceTable) -> Self {
        Self { client, llm, prices }
    }
}

#[async_trait::async_trait(?Send)]
impl BatchProvider for AnthropicBatchProvider {
    fn kind(&self) -> &'static str {
        "anthropic"
    }

    fn llm(&self) -> &ResolvedLlm {
        &self.llm
    }

    async fn create(&self, _batch_id: BatchId, requests: &[WorkRequest]) -> ProviderCreate {
        // Whether a system prompt is marked cacheable depends on how many requests of this batch
        // share it; decide once per distinct prompt.
        let mut sharing: HashMap<&str, u64> = HashMap::new();
        for request in requests {
            *sharing.entry(request.request_body.system.as_str()).or_default() += 1;
        }
        let price = self.prices.price(&self.llm.model);
        let markers: HashMap<&str, Option<CacheTtl>> = sharing
            .iter()
            .map(|(system, count)| {
                let reuse = PrefixReuse::batch(price, *count);
                (*system, memsift_llm::system_cache(&self.llm, system, &reuse))
            })
            .collect();
        let batch_requests: Vec<BatchRequest> = requests
            .iter()
            .map(|request| {
                let system = request.request_body.system.as_str();
                BatchRequest {
                    custom_id: request.id.to_string(),
                    params: memsift_llm::build_batch_params(
                        request.purpose,
                        // With the output allowance its budget reservation priced, when it has one.
                        &self.llm.with_output_cap(request.max_output_tokens),
                        system,
                        vec![InputMessage::user(&request.request_body.user_message)],
                        markers.get(system).copied().flatten(),
                    ),
                }
            })
            .collect();
        match self.client.create_batch(&batch_requests).await {
            CreateOutcome::Created(batch) => ProviderCreate::Created {
                provider_batch_id: batch.id,
                expires_at: Some(batch.expires_at),
            },
            CreateOutcome::Rejected(error) => rejected(error, &self.llm),
            CreateOutcome::Unknown(error) => unknown(error, &self.llm),
        }
    }

    async fn retrieve(&self, provider_batch_id: &str) -> Result<ProviderPoll, ProviderFault> {
        let batch = self
            .client
            .retrieve_batch(provider_batch_id)
            .await
            .map_err(|error| self.fault(error, Call::Poll))?;
        Ok(match batch.processing_status {
            ProcessingStatus::Ended => {
                let counts = batch.request_counts;
                ProviderPoll::Ended([
                    counts.succeeded as i64,
                    counts.errored as i64,
                    counts.expired as i64,
                    counts.canceled as i64,
                ])
            }
            // `canceling` is not terminal: requests already running may still finish.
            ProcessingStatus::InProgress | ProcessingStatus::Canceling | ProcessingStatus::Other => {
                ProviderPoll::Running
            }
        })
    }

    async fn results(&self, provider_batch_id: &str) -> Result<ResultStream, ProviderFault> {
        let batch = self
            .client
            .retrieve_batch(provider_batch_id)
            .await
            .map_err(|error| self.fault(error, Call::Download))?;
        let lines = self
            .client
            .batch_results(&batch)
            .await
            .map_err(|error| self.fault(error, Call::Download))?;
        let prices = self.prices.clone();
        let llm = self.llm.clone();
        Ok(Box::pin(lines.map(move |line| {
            let line = line.map_err(|error| ProviderFault::classify(error, Call::Download, &llm))?;
            Ok(match line.result {
                BatchResult::Succeeded { message } => ResultLine::Answer {
                    raw_output: message.text(),
                    stop_reason: message
                        .stop_reason
                        .and_then(|reason| serde_json::to_value(reason).ok())
                        .and_then(|value| value.as_str().map(str::to_owned)),
                    usage: usage_of(&message.token_usage(), &message.model, &prices),
                    custom_id: line.custom_id,
                },
                BatchResult::Errored { error } => ResultLine::Failed {
                    custom_id: line.custom_id,
                    status: RequestStatus::Errored,
                    refused: matches!(error.error.kind.as_str(), "invalid_request_error" | "not_found_error"),
                    error: format!("{}: {}", error.error.kind, error.error.message),
                },
                BatchResult::Canceled => ResultLine::Failed {
                    custom_id: line.custom_id,
                    status: RequestStatus::Canceled,
                    error: "canceled before it ran".to_owned(),
                    refused: false,
                },
                BatchResult::Expired => ResultLine::Failed {
                    custom_id: line.custom_id,
                    status: RequestStatus::Expired,
                    error: "the 24 h processing window ended before it ran".to_owned(),
                    refused: false,
                },
            })
        })))
    }

    async fn delete(&self, batch: &BatchRow) -> Result<(), ProviderFault> {
        let provider_batch_id = self.provider_batch_id(batch)?;
        match self.client.delete_batch(provider_batch_id).await {
            // Already gone (an earlier erasure, or the provider's own retention): nothing left to delete.
            Ok(()) | Err(LlmError::NotFound { .. }) => Ok(()),
            Err(error) => Err(self.fault(error, Call::Cleanup)),
        }
    }

    async fn cancel(&self, provider_batch_id: &str) -> Result<(), ProviderFault> {
        self.client
            .cancel_batch(provider_batch_id)
            .await
            .map(|_| ())
            .map_err(|error| self.fault(error, Call::Cleanup))
    }

    async fn find(
        &self,
        batch: &BatchRow,
        request_ids: &[String],
        known: &[String],
    ) -> Result<Option<String>, ProviderFault> {
        // Anthropic batches carry no metadata: match the creation window and the request count,
        // then, once a candidate has ended, confirm it by the custom_ids of its results.
        let Some(started) = batch.submit_started_at else {
            return Ok(None);
        };
        let candidates = self
            .client
            .list_batches_since(started - CLOCK_SKEW)
            .await
            .map_err(|error| self.fault(error, Call::List))?;
        let ours: HashSet<&str> = request_ids.iter().map(String::as_str).collect();
        let window_end = started + CLOCK_SKEW + Duration::minutes(10);
        let mut matching: Vec<_> = candidates
            .into_iter()
            .filter(|candidate| !known.contains(&candidate.id))
            .filter(|candidate| candidate.created_at >= started - CLOCK_SKEW && candidate.created_at <= window_end)
            .filter(|candidate| candidate.request_counts.total() as i64 == batch.n_requests)
            .collect();
        matching.sort_by_key(|candidate| candidate.created_at);
        for candidate in matching {
            if candidate.processing_status != ProcessingStatus::Ended {
                return Ok(Some(candidate.id));
            }
            let mut lines = self
                .client
                .batch_results(&candidate)
                .await
                .map_err(|error| self.fault(error, Call::List))?;
            let mut all_ours = true;
            while let Some(line) = lines.next().await {
                let line = line.map_err(|error| self.fault(error, Call::List))?;
                if !ours.contains(line.custom_id.as_str()) {
                    all_ours = false;
                    break;
                }
            }
            if all_ours {
                return Ok(Some(candidate.id));
            }
        }
        Ok(None)
    }
}

/// OpenAI Files + Batches (chat completions endpoint) for one `{purpose}_{tier}` config.
pub struct OpenAiBatchProvider {
    client: OpenAiClient,
    llm: ResolvedLlm,
    prices: PriceTable,
}

impl OpenAiBatchProvider {
    /// A provider sending with `client`, building requests from `llm`, pricing with `prices`.
    pub fn new(client: OpenAiClient, llm: ResolvedLlm, prices: PriceTable) -> Self {
        Self { client, llm, prices }
    }
}

const CHAT_ENDPOINT: &str = "/v1/chat/completions";

#[async_trait::async_trait(?Send)]
impl BatchProvider for OpenAiBatchProvider {
    fn kind(&self) -> &'static str {
        "openai"
    }

    fn llm(&self) -> &ResolvedLlm {
        &self.llm
    }

    async fn create(&self, batch_id: BatchId, requests: &[WorkRequest]) -> ProviderCreate {
        let lines: Vec<BatchInputLine> = requests
            .iter()
            .map(|request| {
                let chat = memsift_llm::build_chat_request(
                    request.purpose,
                    &self.llm.with_output_cap(request.max_output_tokens),
                    &request.request_body.system,
                    vec![request.request_body.user_message.clone()],
                );
                BatchInputLine::chat(request.id.to_string(), &chat)
            })
            .collect();
        // The file name carries our id, so an orphaned upload can be recognised later.
        let file = match self
            .client
            .upload_batch_file(&format!("memsift-{batch_id}.jsonl"), &lines)
            .await
        {
            CreateOutcome::Created(file) => file,
            CreateOutcome::Rejected(error) => return rejected(error, &self.llm),
            CreateOutcome::Unknown(error) => return unknown(error, &self.llm),
        };
        let metadata = BTreeMap::from([(BATCH_UUID_METADATA_KEY.to_owned(), batch_id.to_string())]);
        match self.client.create_batch(&file.id, CHAT_ENDPOINT, &metadata).await {
            CreateOutcome::Created(batch) => ProviderCreate::Created {
                provider_batch_id: batch.id,
                expires_at: batch
                    .expires_at
                    .and_then(|seconds| Utc.timestamp_opt(seconds, 0).single()),
            },
            CreateOutcome::Rejected(error) => rejected(error, &self.llm),
            CreateOutcome::Unknown(error) => unknown(error, &self.llm),
        }
    }

    async fn retrieve(&self, provider_batch_id: &str) -> Result<ProviderPoll, ProviderFault> {
        let batch = self
            .client
            .retrieve_batch(provider_batch_id)
            .await
            .map_err(|error| self.fault(error, Call::Poll))?;
        if !batch.status.is_terminal() {
            return Ok(ProviderPoll::Running);
        }
        // Outcomes come from the files, not the counters (an expired batch may under-count).
        let counts = batch.request_counts.unwrap_or_default();
        Ok(ProviderPoll::Ended([
            counts.completed as i64,
            counts.failed as i64,
            0,
            0,
        ]))
    }

    async fn results(&self, provider_batch_id: &str) -> Result<ResultStream, ProviderFault> {
        let batch = self
            .client
            .retrieve_batch(provider_batch_id)
            .await
            .map_err(|error| self.fault(error, Call::Download))?;
        let mut streams = Vec::new();
        for which in [ResultFile::Output, ResultFile::Error] {
            // A completed batch may have no output file (everything failed): read both, and
            // treat a missing file as empty.
            if let Some(lines) = self
                .client
                .batch_result_lines(&batch, which)
                .await
                .map_err(|error| self.fault(error, Call::Download))?
            {
                streams.push(lines);
            }
        }
        let prices = self.prices.clone();
        let llm = self.llm.clone();
        Ok(Box::pin(futures_util::stream::iter(streams).flatten().map(
            move |line| {
                let line: BatchOutputLine =
                    line.map_err(|error| ProviderFault::classify(error, Call::Download, &llm))?;
                Ok(convert_openai_line(line, &prices))
            },
        )))
    }

    async fn delete(&self, batch: &BatchRow) -> Result<(), ProviderFault> {
        let provider_batch_id = self.provider_batch_id(batch)?;
        let remote = match self.client.retrieve_batch(provider_batch_id).await {
            Ok(remote) => remote,
            Err(LlmError::NotFound { .. }) => return Ok(()),
            Err(error) => return Err(self.fault(error, Call::Cleanup)),
        };
        // The batch object itself cannot be deleted on OpenAI; the files hold the text.
        for file_id in [
            Some(remote.input_file_id.clone()),
            remote.output_file_id.clone(),
            remote.error_file_id.clone(),
        ]
        .into_iter()
        .flatten()
        {
            match self.client.delete_file(&file_id).await {
                Ok(()) | Err(LlmError::NotFound { .. }) => {}
                Err(error) => return Err(self.fault(error, Call::Cleanup)),
            }
        }
        Ok(())
    }

    async fn cancel(&self, provider_batch_id: &str) -> Result<(), ProviderFault> {
        self.client
            .cancel_batch(provider_batch_id)
            .await
            .map(|_| ())
            .map_err(|error| self.fault(error, Call::Cleanup))
    }

    async fn find(
        &self,
        batch: &BatchRow,
        _request_ids: &[String],
        known: &[String],
    ) -> Result<Option<String>, ProviderFault> {
        let since = batch.submit_started_at.unwrap_or(batch.created_at) - CLOCK_SKEW;
        let found = self
            .client
            .find_batch_by_uuid(&batch.id, since.timestamp())
            .await
            .map_err(|error| self.fault(error, Call::List))?;
        Ok(found.map(|found| found.id).filter(|id| !known.contains(id)))
    }
}

fn convert_openai_line(line: BatchOutputLine, prices: &PriceTable) -> ResultLine {
    match line.chat_completion() {
        Some(Ok(completion)) => ResultLine::Answer {
            raw_output: completion.text().unwrap_or_default().to_owned(),
            stop_reason: completion
                .choices
                .first()
                .and_then(|choice| choice.finish_reason.clone()),
            usage: usage_of(&completion.token_usage(), &completion.model, prices),
            custom_id: line.custom_id,
        },
        Some(Err(error)) => ResultLine::Failed {
            custom_id: line.custom_id,
            status: RequestStatus::Errored,
            error: error.to_string(),
            refused: false,
        },
        None => {
            let code = line.failure_code().unwrap_or_else(|| "unknown".to_owned());
            let status = match code.as_str() {
                "batch_expired" => RequestStatus::Expired,
                "batch_cancelled" => RequestStatus::Canceled,
                _ => RequestStatus::Errored,
            };
            // A line answered 400, 404 or 422 was refused as invalid rather than failed to run.
            let refused = code.contains("invalid")
                || matches!(
                    code.as_str(),
                    "model_not_found" | "not_found_error" | "http_400" | "http_404" | "http_422"
                );
            ResultLine::Failed {
                custom_id: line.custom_id,
                status,
                error: code,
                refused,
            }
        }
    }
}
