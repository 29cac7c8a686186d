//! The offline heuristic extractor: deterministic rules over a segment's user turns, no provider.
//!
//! It returns items in the extraction output contract, serialised as the raw output of a request,
//! so its results go through the same processor and apply path as a model's.
//!
//! The rules follow the extraction prompt: only the user's own first-person statements are
//! sources, and precision beats recall, so questions, hedges, hypotheticals and fragments that
//! only make sense inside the conversation ("I love that") are dropped rather than guessed at.

#![deny(missing_docs)]

mod dates;
mod rules;
mod text;

use std::collections::HashMap;

use chrono::NaiveDate;
use memsift_core::contract::{ExtractedEntity, ExtractedItem, Turn};
use memsift_core::status::{Role, Temporal};
use regex::{Captures, Regex};

use crate::dates::DateHit;
use crate::rules::{COMPILED, Category, Rule};

/// The version of the rule set, recorded on requests like a prompt version.
pub const RULES_VERSION: &str = "heuristic@1";

/// Memories shorter than this say nothing useful on their own.
const MIN_TEXT_CHARS: usize = 10;

/// Extracts durable first-person facts from the user turns of a chunk.
///
/// Items come out in turn order, then sentence order, then rule order; an identical text seen
/// again keeps its first position and gains the later turn as evidence.
pub fn extract(turns: &[Turn]) -> Vec<ExtractedItem> {
    let mut items: Vec<ExtractedItem> = Vec::new();
    let mut position_by_text: HashMap<String, usize> = HashMap::new();
    for turn in turns.iter().filter(|turn| turn.role == Role::User) {
        for item in extract_turn(turn) {
            match position_by_text.get(&item.text) {
                Some(&position) => merge_duplicate(&mut items[position], item),
                None => {
                    position_by_text.insert(item.text.clone(), items.len());
                    items.push(item);
                }
            }
        }
    }
    items
}

/// [`extract`], serialised as the JSON array a model would return.
pub fn extract_json(turns: &[Turn]) -> String {
    serde_json::to_string(&extract(turns)).expect("extracted items always serialise: plain strings and numbers")
}

fn merge_duplicate(existing: &mut ExtractedItem, duplicate: ExtractedItem) {
    for label in duplicate.evidence_turns {
        if !existing.evidence_turns.contains(&label) {
            existing.evidence_turns.push(label);
        }
    }
    // Two rules reading the same text may disagree on privacy; the cautious answer wins.
    existing.sensitive |= duplicate.sensitive;
}

/// Who a memory is about, as the sentence subject and its possessive.
struct Subject {
    name: String,
    possessive: String,
}

impl Subject {
    fn for_turn(turn: &Turn) -> Self {
        match turn.speaker.as_deref().map(str::trim).filter(|name| !name.is_empty()) {
            Some(name) => Subject {
                name: name.to_owned(),
                possessive: format!("{name}'s"),
            },
            None => Subject {
                name: "The user".to_owned(),
                possessive: "The user's".to_owned(),
            },
        }
    }
}

fn extract_turn(turn: &Turn) -> Vec<ExtractedItem> {
    let subject = Subject::for_turn(turn);
    let today = turn.at.date_naive();
    let normalised = text::normalise(&turn.content);
    let mut items = Vec::new();
    for sentence in text::sentences(&normalised) {
        if text::skip_sentence(&sentence) {
            continue;
        }
        for clause in text::clauses(&sentence) {
            if text::is_uncertain(&clause) {
                continue;
            }
            items.extend(apply_rules(&clause, &subject, today, &turn.label));
        }
    }
    items
}

/// Runs the rule table over one clause; at most one rule per category fires.
fn apply_rules(clause: &str, subject: &Subject, today: NaiveDate, label: &str) -> Vec<ExtractedItem> {
    let date = dates::find_date(clause, today);
    let dateless = date.as_ref().map(|hit| without_span(clause, hit));
    let mut fired: Vec<Category> = Vec::new();
    let mut items = Vec::new();
    for compiled in COMPILED.iter() {
        let rule = compiled.rule;
        if fired.contains(&rule.category) {
            continue;
        }
        let (haystack, hit) = match (rule.needs_date, &dateless, &date) {
            (false, _, _) => (clause, None),
            (true, Some(dateless), Some(hit)) => (dateless.as_str(), Some(hit)),
            (true, _, _) => continue,
        };
        let Some(caps) = compiled.regex.captures(haystack) else {
            continue;
        };
        let Some(values) = captured_values(&compiled.regex, &caps) else {
            continue;
        };
        let Some(item) = build_item(rule, &values, subject, hit, clause, label) else {
            continue;
        };
        fired.push(rule.category);
        items.push(item);
    }
    items
}

/// The clause with its date phrase cut out, so plan rules see "I'm flying to Rome".
fn without_span(clause: &str, hit: &DateHit) -> String {
    let joined = format!("{} {}", &clause[..hit.start], &clause[hit.end..]);
    joined
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .trim_end_matches([',', '.', ' '])
        .to_owned()
}

fn build_item(
    rule: &Rule,
    values: &HashMap<String, String>,
    subject: &Subject,
    hit: Option<&DateHit>,
    clause: &str,
    label: &str,
) -> Option<ExtractedItem> {
    let rendered = render(rule.template, values, subject, hit)?;
    let text = tidy(&rendered);
    if text.chars().count() < MIN_TEXT_CHARS {
        return None;
    }
    let temporal = if rule.temporal == Temporal::Durable && rules::RECURRING.is_match(clause) {
        Temporal::Recurring
    } else {
        rule.temporal
    };
    let mut item = ExtractedItem::new(text, temporal, vec![label.to_owned()]);
    item.confidence = rule.confidence;
    item.sensitive = rule.sensitive || rules::mentions_private_detail(clause);
    item.happens_at = hit.map(|hit| hit.date.format("%Y-%m-%d").to_string());
    item.entities = entities(rule, values);
    Some(item)
}

/// Cleans every matched group; one refused or implausible group refuses the whole rule.
fn captured_values(regex: &Regex, caps: &Captures<'_>) -> Option<HashMap<String, String>> {
    let mut values = HashMap::new();
    for (index, name) in regex.capture_names().enumerate() {
        let (Some(name), Some(group)) = (name, caps.get(index)) else {
            continue;
        };
        let raw = group.as_str();
        let value = if raw.trim().is_empty() {
            String::new()
        } else if rules::VERBATIM_GROUPS.contains(&name) {
            // A repetition phrase may open the clause ("Every Monday, I …") but sits mid-sentence here.
            let squashed = raw.split_whitespace().collect::<Vec<_>>().join(" ");
            if name == "every" {
                lowercase_first(&squashed)
            } else {
                squashed
            }
        } else {
            text::clean_capture(raw)?
        };
        if !rules::plausible(name, &value) {
            return None;
        }
        values.insert(name.to_owned(), value);
    }
    Some(values)
}

fn lowercase_first(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// Fills a template; `None` when a required group is missing.
fn render(
    template: &str,
    values: &HashMap<String, String>,
    subject: &Subject,
    hit: Option<&DateHit>,
) -> Option<String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find(['[', '{']) {
        out.push_str(&rest[..start]);
        let opener = rest[start..].chars().next().unwrap_or('{');
        if opener == '[' {
            let end = start + rest[start..].find(']')?;
            if let Some(section) = render(&rest[start + 1..end], values, subject, hit) {
                out.push_str(&section);
            }
            rest = &rest[end + 1..];
        } else {
            let end = start + rest[start..].find('}')?;
            out.push_str(&placeholder(&rest[start + 1..end], values, subject, hit)?);
            rest = &rest[end + 1..];
        }
    }
    out.push_str(rest);
    Some(out)
}

fn placeholder(
    key: &str,
    values: &HashMap<String, String>,
    subject: &Subject,
    hit: Option<&DateHit>,
) -> Option<String> {
    let value = |name: &str| values.get(name).filter(|value| !value.is_empty()).cloned();
    match key {
        "S" => Some(subject.name.clone()),
        "P" => Some(subject.possessive.clone()),
        "date" => hit.map(|hit| hit.date.format("%Y-%m-%d").to_string()),
        "monthday" => hit.map(|hit| hit.date.format("%B %-d").to_string()),
        _ => match key.split_once(':') {
            Some(("a", name)) => value(name).map(|v| text::with_article(&v)),
            Some(("v", name)) => value(name).map(|v| text::third_person_verb(&v)),
            _ => values.get(key).cloned(),
        },
    }
}

/// Collapses spaces left by empty groups and makes the sentence start with a capital.
fn tidy(rendered: &str) -> String {
    let collapsed = rendered
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace(" .", ".");
    let mut chars = collapsed.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

fn entities(rule: &Rule, values: &HashMap<String, String>) -> Vec<ExtractedEntity> {
    let mut found: Vec<ExtractedEntity> = Vec::new();
    for (group, kind) in rule.entities {
        let Some(value) = values.get(*group) else { continue };
        let name = value
            .strip_prefix("the ")
            .or_else(|| value.strip_prefix("The "))
            .unwrap_or(value);
        // Only proper names become entities; "a small startup" is not one.
        if !name.chars().next().is_some_and(char::is_uppercase) {
            continue;
        }
        let entity = ExtractedEntity {
            name: name.to_owned(),
            kind: (*kind).to_owned(),
        };
        if !found.contains(&entity) {
            found.push(entity);
        }
    }
    found
}
