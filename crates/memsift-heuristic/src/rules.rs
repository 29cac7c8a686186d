//! The rule table: each rule is a first-person pattern, a third-person template and the flags
//! the memory gets (category, sensitivity, how long it holds, how sure the rule is).
//!
//! Patterns are anchored at the start of a clause wherever possible, because "I live in …" at
//! the start of a clause is a statement about the user while the same words later in a sentence
//! are often about someone else. Fragment names in angle brackets (`<PLACE>`) are expanded from
//! [`FRAGMENTS`] before compiling, so the vocabulary lives in one place.

use std::sync::LazyLock;

use memsift_core::status::Temporal;
use regex::Regex;

/// What kind of fact a rule extracts; at most one rule per category fires on a clause, so a
/// specific rule listed first shadows its general fallback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Category {
    Identity,
    Residence,
    Work,
    Family,
    Pet,
    Preference,
    Health,
    Plan,
    Routine,
    AssistantRule,
}

/// One extraction rule.
pub(crate) struct Rule {
    pub category: Category,
    /// A case-insensitive pattern with named groups and `<FRAGMENT>` references.
    pub pattern: &'static str,
    /// `{S}` subject, `{P}` possessive subject, `{group}`, `{a:group}` with an article,
    /// `{v:group}` as a third-person verb, `{date}` ISO day, `{monthday}` like "May 3";
    /// `[ … ]` is dropped unless every group inside it matched.
    pub template: &'static str,
    pub sensitive: bool,
    pub temporal: Temporal,
    pub confidence: f64,
    /// Groups that name an entity, with the entity kind.
    pub entities: &'static [(&'static str, &'static str)],
    /// Plan rules match the clause with its date phrase removed and only fire when one resolved.
    pub needs_date: bool,
}

/// Shared vocabulary spliced into patterns.
const FRAGMENTS: &[(&str, &str)] = &[
    ("<IM>", r"i(?:'m|\s+am|m)"),
    ("<NAME>", r"(?-i:\p{Lu}(?:\p{L}*['-]\p{Lu}\p{L}+|\p{L}+))"),
    (
        "<PLACE>",
        r"(?:the\s+)?(?-i:\p{Lu}[\p{L}\p{M}.'-]*(?:\s+(?:(?:of|de|del|la|upon)\s+)?\p{Lu}[\p{L}\p{M}.'-]*){0,3})",
    ),
    (
        "<ORG>",
        r"(?:(?:the\s+)?(?-i:[\p{Lu}\d][\p{L}\p{M}\p{N}.&'+-]*(?:\s+(?:(?:of|for|and|&|de)\s+)?[\p{Lu}\d&][\p{L}\p{M}\p{N}.&'+-]*){0,4})|an?\s+(?:[\p{L}-]+\s+){0,2}?(?:startup|start-up|company|bank|hospital|school|university|college|firm|agency|store|shop|restaurant|cafe|bakery|factory|nonprofit|non-profit|charity|lab|library|museum|hotel|clinic|studio|warehouse|supermarket|gym|shelter|newspaper|magazine|publisher|consultancy|airline|garage|salon|pharmacy|daycare|nursing\s+home))",
    ),
    (
        "<REL>",
        r"best\s+friend|boyfriend|girlfriend|friend|wife|husband|partner|fianc[ée]e?|spouse|stepson|stepdaughter|stepmom|stepdad|stepmother|stepfather|son|daughter|twin\s+brother|twin\s+sister|brother|sister|mom|mum|mother|dad|father|grandma|grandmother|grandpa|grandfather|granddaughter|grandson|aunt|uncle|cousin|niece|nephew|roommate|flatmate|coworker|colleague|boss|mentor",
    ),
    (
        "<PET>",
        r"dog|cat|puppy|kitten|hamster|rabbit|bunny|parrot|bird|goldfish|fish|turtle|tortoise|snake|lizard|gecko|horse|pony|guinea\s+pig|ferret|rat|chinchilla|hedgehog|iguana|budgie|cockatiel|pup",
    ),
    (
        "<PETS>",
        r"dogs|cats|puppies|kittens|hamsters|rabbits|bunnies|parrots|birds|fish|turtles|snakes|lizards|horses|guinea\s+pigs|ferrets|rats|chickens|goats",
    ),
    ("<COUNT>", r"two|three|four|five|six|seven|eight|nine|ten|\d{1,2}"),
    (
        "<JOB>",
        r"student|teacher|nurse|doctor|physician|surgeon|engineer|developer|programmer|designer|lawyer|attorney|accountant|architect|artist|writer|author|journalist|photographer|chef|cook|baker|barista|waiter|waitress|bartender|pharmacist|dentist|therapist|counselor|counsellor|psychologist|psychiatrist|scientist|researcher|professor|lecturer|tutor|manager|consultant|analyst|electrician|plumber|carpenter|mechanic|firefighter|paramedic|pilot|driver|farmer|veterinarian|vet|musician|singer|dancer|actor|actress|athlete|coach|librarian|social\s+worker|police\s+officer|officer|soldier|salesperson|entrepreneur|freelancer|intern|cashier|secretary|receptionist|translator|editor|producer|painter|ceo|cto|cfo|founder|co-founder|director|administrator|technician|caregiver|midwife|veteran|freshman|sophomore|phd\s+student|grad\s+student|postdoc",
    ),
    (
        "<NAT>",
        r"american|canadian|mexican|brazilian|argentinian|argentine|chilean|colombian|peruvian|venezuelan|cuban|british|english|scottish|welsh|irish|french|german|italian|spanish|portuguese|dutch|belgian|swiss|austrian|swedish|norwegian|danish|finnish|icelandic|polish|czech|slovak|hungarian|romanian|bulgarian|serbian|croatian|ukrainian|russian|greek|turkish|israeli|egyptian|nigerian|kenyan|ethiopian|ghanaian|south\s+african|moroccan|indian|pakistani|bangladeshi|sri\s+lankan|nepali|chinese|taiwanese|japanese|korean|vietnamese|thai|filipino|filipina|indonesian|malaysian|singaporean|australian|new\s+zealander|iranian|iraqi|lebanese|syrian|jordanian|saudi|emirati",
    ),
    (
        "<LANGS>",
        r"(?-i:\p{Lu}\p{L}+)(?:(?:\s*,\s*(?:and\s+)?|\s+and\s+|\s*&\s*)(?-i:\p{Lu}\p{L}+))*",
    ),
    (
        "<CONDITION>",
        r"type\s+[12]\s+diabetes|diabetes|asthma|adhd|autism|anxiety|depression|epilepsy|migraines|celiac\s+disease|coeliac\s+disease|crohn's(?:\s+disease)?|ibs|arthritis|ptsd|ocd|bipolar(?:\s+disorder)?|high\s+blood\s+pressure|hypertension|a\s+heart\s+condition|chronic\s+pain|fibromyalgia|lupus|multiple\s+sclerosis|cancer|tinnitus|insomnia|sleep\s+apnea|eczema|psoriasis|dyslexia|long\s+covid|hypothyroidism|endometriosis|pcos|a\s+disability|a\s+bad\s+back",
    ),
    (
        "<DIET>",
        r"vegan|vegetarian|pescatarian|lactose[\s-]intolerant|gluten[\s-]intolerant|diabetic|type\s+[12]\s+diabetic|celiac|coeliac|epileptic|asthmatic|sober|deaf|hard\s+of\s+hearing|colou?r[\s-]?blind|blind|autistic|dyslexic|pregnant|in\s+recovery|on\s+a\s+(?:keto|low-carb|low-sodium|gluten-free|plant-based)\s+diet",
    ),
    (
        "<MEDS>",
        r"insulin|antidepressants|blood\s+thinners|birth\s+control|an\s+inhaler|metformin|lithium|levothyroxine|ssris?|adderall|ritalin|statins|(?:medication|meds|medicine)\s+for\s+[\p{L}' ]{3,40}",
    ),
    (
        "<RECUR>",
        r"every\s+(?:single\s+)?(?:day|morning|afternoon|evening|night|week|weekend|month|year|monday|tuesday|wednesday|thursday|friday|saturday|sunday|other\s+(?:day|week))|on\s+(?:mondays|tuesdays|wednesdays|thursdays|fridays|saturdays|sundays|weekends|weekdays)|each\s+(?:day|morning|evening|week|month|year)|daily|weekly|monthly|(?:once|twice|three\s+times)\s+a\s+(?:day|week|month|year)",
    ),
    (
        "<ASSIST>",
        r"use|add|include|call\s+me|show|suggest|recommend|reply|respond|answer|write|start|end|format|ask|remind|share|bring\s+up|explain|apologi[sz]e|summari[sz]e|translate|sign|assume|mention|correct|speak|address\s+me|refer\s+to|offer|list|quote|interrupt|curse|swear|sugarcoat|lecture|repeat|guess|make\s+up|give\s+me|be\s+(?:so\s+|too\s+|overly\s+|more\s+|less\s+)?(?:concise|brief|short|verbose|formal|informal|polite|casual|honest|direct|blunt|wordy|long-winded|technical|detailed|sarcastic|chatty|pushy|preachy|condescending)",
    ),
    (
        "<ASSIST_ING>",
        r"using|adding|including|calling\s+me|showing|suggesting|recommending|replying|responding|answering|writing|starting|ending|formatting|asking|reminding|sharing|bringing\s+up|explaining|apologi[sz]ing|summari[sz]ing|translating|signing|assuming|mentioning|correcting|offering|listing|quoting|interrupting|cursing|swearing|sugarcoating|lecturing|repeating|guessing|making\s+up|giving\s+me|being\s+so\s+\p{L}+",
    ),
];

use Category::*;
use Temporal::{Durable, OneOff, Recurring, Unknown};

macro_rules! rule {
    ($category:expr, $pattern:literal, $template:literal, sensitive: $sensitive:expr, $temporal:expr, $confidence:literal
     $(, entities: $entities:expr)? $(, needs_date: $needs_date:expr)? $(,)?) => {
        Rule {
            category: $category,
            pattern: $pattern,
            template: $template,
            sensitive: $sensitive,
            temporal: $temporal,
            confidence: $confidence,
            entities: rule!(@entities $($entities)?),
            needs_date: rule!(@date $($needs_date)?),
        }
    };
    (@entities) => { &[] };
    (@entities $entities:expr) => { $entities };
    (@date) => { false };
    (@date $needs_date:expr) => { $needs_date };
}

/// The rules, in priority order.
pub(crate) const RULES: &[Rule] = &[
    // Explicit rules for the assistant come first: "don't call me Bob" is a rule, not a nickname.
    rule!(AssistantRule, r"^(?:from\s+now\s+on,?\s+)?(?:please\s+)?(?:don't|dont|do\s+not)\s+(?:ever\s+)?(?P<x>(?:<ASSIST>)\b.*)$",
        "{S} does not want the assistant to {x}.", sensitive: false, Durable, 0.85),
    rule!(AssistantRule, r"^(?:from\s+now\s+on,?\s+)?(?:please\s+)?never\s+(?:ever\s+)?(?P<x>(?:<ASSIST>)\b.*)$",
        "{S} wants the assistant to never {x}.", sensitive: false, Durable, 0.9),
    rule!(AssistantRule, r"^(?:from\s+now\s+on,?\s+)?(?:please\s+)?always\s+(?P<x>(?:<ASSIST>)\b.*)$",
        "{S} wants the assistant to always {x}.", sensitive: false, Durable, 0.9),
    rule!(AssistantRule, r"^(?:please\s+)?stop\s+(?P<x>(?:<ASSIST_ING>)\b.*)$",
        "{S} wants the assistant to stop {x}.", sensitive: false, Durable, 0.85),
    rule!(AssistantRule, r"^i\s+(?:don't|do\s+not)\s+want\s+you\s+to\s+(?:ever\s+)?(?P<x>(?:<ASSIST>)\b.*)$",
        "{S} does not want the assistant to {x}.", sensitive: false, Durable, 0.85),
    rule!(AssistantRule, r"^i\s+want\s+you\s+to\s+(?P<adv>always|never)\s+(?P<x>(?:<ASSIST>)\b.*)$",
        "{S} wants the assistant to {adv} {x}.", sensitive: false, Durable, 0.9),
    rule!(AssistantRule, r"^from\s+now\s+on,?\s+(?:please\s+)?(?P<x>(?:<ASSIST>)\b.*)$",
        "{S} wants the assistant to {x} from now on.", sensitive: false, Durable, 0.85),
    // Identity.
    rule!(Identity, r"^(?:my\s+name\s+is|my\s+name's|the\s+name's|<IM>\s+called)\s+(?P<name><NAME>(?:\s+<NAME>)?)\b",
        "{P} name is {name}.", sensitive: true, Durable, 0.95, entities: &[("name", "person")]),
    rule!(Identity, r"^(?:please\s+)?(?:you\s+can\s+|just\s+)?call\s+me\s+(?P<nick><NAME>)\s*$",
        "{S} wants to be called {nick}.", sensitive: true, Durable, 0.9),
    rule!(Identity, r"^i\s+go\s+by\s+(?P<nick><NAME>)\s*$",
        "{S} goes by {nick}.", sensitive: true, Durable, 0.9),
    rule!(Identity, r"^my\s+pronouns\s+are\s+(?P<pronouns>\p{L}+/\p{L}+(?:/\p{L}+)?)",
        "{S} uses the pronouns {pronouns}.", sensitive: true, Durable, 0.95),
    rule!(Identity, r"^(?:<IM>|i\s+just\s+turned|i\s+turned)\s+(?P<age>\d{1,3})(?:\s*(?:years?\s+old|yrs?\s+old|y/?o))?(?:\s+(?:today|this\s+year|last\s+week|yesterday))?\s*$",
        "{S} is {age} years old.", sensitive: true, Durable, 0.85),
    rule!(Identity, r"^<IM>\s+(?:an?\s+)?(?P<nat>(?:<NAT>)(?:[\s-](?:<NAT>))?)\s*$",
        "{S} is {nat}.", sensitive: true, Durable, 0.85),
    rule!(Identity, r"^<IM>\s+(?P<name><NAME>)\s*$",
        "{P} name is {name}.", sensitive: true, Durable, 0.8, entities: &[("name", "person")]),
    rule!(Identity, r"^i\s+(?:speak|can\s+speak)\s+(?:fluent\s+)?(?P<langs><LANGS>)\b",
        "{S} speaks {langs}.", sensitive: false, Durable, 0.85),
    rule!(Identity, r"^<IM>\s+fluent\s+in\s+(?P<langs><LANGS>)\b",
        "{S} is fluent in {langs}.", sensitive: false, Durable, 0.85),
    rule!(Identity, r"^my\s+(?P<which>native|first|mother)\s+(?:language|tongue)\s+is\s+(?P<langs><LANGS>)\b",
        "{P} {which} language is {langs}.", sensitive: false, Durable, 0.85),
    // Residence and origin.
    rule!(Residence, r"^(?:<IM>\s+(?:moving|relocating)|i\s+move)\s+to\s+(?P<place><PLACE>)\s*$",
        "{S} is moving to {place} on {date}.", sensitive: true, OneOff, 0.85, entities: &[("place", "place")], needs_date: true),
    rule!(Residence, r"^i\s+(?:currently\s+|(?P<now>now)\s+)?(?:live|reside)\s+in\s+(?P<place><PLACE>)(?:\s+(?P<later>now|these\s+days|nowadays)\b)?",
        "{S} [{now} ]lives in {place}[ {later}].", sensitive: true, Durable, 0.9, entities: &[("place", "place")]),
    rule!(Residence, r"^<IM>\s+(?:currently\s+|(?P<now>now)\s+)?(?:living|based|located)\s+(?:in|out\s+of)\s+(?P<place><PLACE>)(?:\s+(?P<later>now|these\s+days|nowadays)\b)?",
        "{S} [{now} ]lives in {place}[ {later}].", sensitive: true, Durable, 0.9, entities: &[("place", "place")]),
    rule!(Residence, r"^<IM>\s+(?:moving|relocating)\s+to\s+(?P<place><PLACE>)",
        "{S} is moving to {place}.", sensitive: true, Unknown, 0.8, entities: &[("place", "place")]),
    rule!(Residence, r"^i\s+(?:just\s+|recently\s+)?moved\s+to\s+(?P<place><PLACE>)",
        "{S} moved to {place}.", sensitive: true, Durable, 0.85, entities: &[("place", "place")]),
    rule!(Residence, r"^<IM>\s+(?:originally\s+)?from\s+(?P<place><PLACE>)",
        "{S} is from {place}.", sensitive: true, Durable, 0.85, entities: &[("place", "place")]),
    rule!(Residence, r"^i\s+(?P<verb>grew\s+up|was\s+born|was\s+raised)\s+in\s+(?P<place><PLACE>)",
        "{S} {verb} in {place}.", sensitive: true, Durable, 0.85, entities: &[("place", "place")]),
    rule!(Residence, r"^i\s+was\s+born\s+in\s+(?P<year>(?:19|20)\d\d)\b",
        "{S} was born in {year}.", sensitive: true, Durable, 0.85),
    rule!(Residence, r"^my\s+home\s?town\s+is\s+(?P<place><PLACE>)",
        "{P} hometown is {place}.", sensitive: true, Durable, 0.85, entities: &[("place", "place")]),
    // Work and study.
    rule!(Work, r"^i\s+(?:currently\s+|now\s+)?work\s+as\s+(?P<role>an?\s+[\p{L}' -]{3,40}?)\s+(?P<prep>at|for)\s+(?P<org><ORG>)",
        "{S} works as {role} {prep} {org}.", sensitive: true, Durable, 0.9, entities: &[("org", "organization")]),
    rule!(Work, r"^i\s+(?:currently\s+|(?P<now>now)\s+)?work\s+(?P<prep>at|for)\s+(?P<org><ORG>)(?:\s+(?P<later>now|these\s+days|nowadays)\b)?",
        "{S} [{now} ]works {prep} {org}[ {later}].", sensitive: true, Durable, 0.9, entities: &[("org", "organization")]),
    rule!(Work, r"^<IM>\s+(?:currently\s+|(?P<now>now)\s+)?(?:employed|working)\s+(?P<prep>at|for)\s+(?P<org><ORG>)(?:\s+(?P<later>now|these\s+days|nowadays)\b)?",
        "{S} [{now} ]works {prep} {org}[ {later}].", sensitive: true, Durable, 0.85, entities: &[("org", "organization")]),
    rule!(Work, r"^i\s+(?:currently\s+|now\s+)?work\s+as\s+(?P<role>an?\s+.+)$",
        "{S} works as {role}.", sensitive: true, Durable, 0.85),
    rule!(Work, r"^<IM>\s+an?\s+(?P<role>(?:[\p{L}-]+\s+){0,2}?(?:<JOB>))\s+(?P<prep>at|for|with|in)\s+(?P<org><ORG>)",
        "{S} is {a:role} {prep} {org}.", sensitive: true, Durable, 0.85, entities: &[("org", "organization")]),
    rule!(Work, r"^<IM>\s+an?\s+(?P<role>(?:[\p{L}-]+\s+){0,2}?(?:<JOB>))\s*$",
        "{S} is {a:role}.", sensitive: true, Durable, 0.8),
    rule!(Work, r"^<IM>\s+(?P<status>retired|unemployed|self-employed|between\s+jobs|a\s+stay-at-home\s+(?:mom|dad|parent))\s*$",
        "{S} is {status}.", sensitive: true, Durable, 0.85),
    rule!(Work, r"^<IM>\s+(?:currently\s+)?(?P<verb>studying|majoring\s+in)\s+(?P<field>[\p{L}&' -]{2,40}?)\s+at\s+(?P<org><ORG>)",
        "{S} is {verb} {field} at {org}.", sensitive: true, Durable, 0.85, entities: &[("org", "organization")]),
    rule!(Work, r"^i\s+(?P<verb>study|studied|majored\s+in)\s+(?P<field>[\p{L}&' -]{2,40}?)\s+at\s+(?P<org><ORG>)",
        "{S} {v:verb} {field} at {org}.", sensitive: true, Durable, 0.85, entities: &[("org", "organization")]),
    rule!(Work, r"^<IM>\s+(?:currently\s+)?(?P<verb>studying|majoring\s+in)\s+(?P<field>(?-i:\p{Lu})?[\p{L}&' -]{2,40})$",
        "{S} is {verb} {field}.", sensitive: false, Durable, 0.8),
    rule!(Work, r"^i\s+(?:go\s+to|attend)\s+(?P<org>(?-i:(?:\p{Lu}[\p{L}.'&-]*\s+){0,4}(?:University|College|School|Academy|Institute|Polytechnic)(?:\s+of(?:\s+\p{Lu}[\p{L}.'&-]*){1,3})?))",
        "{S} attends {org}.", sensitive: true, Durable, 0.85, entities: &[("org", "organization")]),
    // Family and partners, with names wherever they are mentioned.
    rule!(Family, r"\bmy\s+(?P<rel><REL>)(?:'s\s+name\s+is|\s+is\s+(?:called|named))?\s+(?P<name><NAME>)\b",
        "{S} has {a:rel} named {name}.", sensitive: true, Durable, 0.9, entities: &[("name", "person")]),
    // After a comma the name must be closed off too, or "my girlfriend, Toby and I" would pair them.
    rule!(Family, r"\bmy\s+(?P<rel><REL>),\s+(?P<name><NAME>)(?:,|\s*$)",
        "{S} has {a:rel} named {name}.", sensitive: true, Durable, 0.9, entities: &[("name", "person")]),
    rule!(Family, r"^<IM>\s+(?P<status>married|engaged)\s+to\s+(?P<name><NAME>)\b",
        "{S} is {status} to {name}.", sensitive: true, Durable, 0.9, entities: &[("name", "person")]),
    rule!(Family, r"^i\s+(?:just\s+)?got\s+(?P<status>married|engaged)\s+to\s+(?P<name><NAME>)\b",
        "{S} got {status} to {name}.", sensitive: true, Durable, 0.9, entities: &[("name", "person")]),
    rule!(Family, r"^<IM>\s+(?:(?:happily|recently|newly)\s+)?(?P<status>married|engaged|divorced|separated|widowed|single)\s*$",
        "{S} is {status}.", sensitive: true, Durable, 0.85),
    rule!(Family, r"^i\s+(?:just\s+|recently\s+)?got\s+(?P<status>married|engaged|divorced)\b",
        "{S} got {status}.", sensitive: true, Durable, 0.85),
    rule!(Family, r"^<IM>\s+(?:dating|seeing|in\s+a\s+relationship\s+with)\s+(?P<name><NAME>)\b",
        "{S} is dating {name}.", sensitive: true, Durable, 0.85, entities: &[("name", "person")]),
    rule!(Family, r"^i\s+have\s+(?P<count>an?|one|<COUNT>)\s+(?P<rel>(?:(?:little|younger|older|big|twin)\s+)?(?:kids|children|sons|daughters|brothers|sisters|siblings|grandchildren|grandkids|son|daughter|brother|sister|kid|child|stepson|stepdaughter))\b",
        "{S} has {count} {rel}.", sensitive: true, Durable, 0.9),
    rule!(Family, r"^<IM>\s+an?\s+(?P<role>(?:single\s+|proud\s+|new\s+)?(?:mom|mum|mother|dad|father|parent|grandmother|grandfather|grandma|grandpa|stepmom|stepdad))(?:\s+of\s+(?P<count><COUNT>))?\s*$",
        "{S} is {a:role}[ of {count}].", sensitive: true, Durable, 0.85),
    // Pets.
    rule!(Pet, r"\bmy\s+(?P<kind><PET>)(?:'s\s+name\s+is|\s+is\s+(?:called|named))?\s+(?P<name><NAME>)\b",
        "{S} has {a:kind} named {name}.", sensitive: false, Durable, 0.9, entities: &[("name", "pet")]),
    rule!(Pet, r"\bmy\s+(?P<kind><PET>),\s+(?P<name><NAME>)(?:,|\s*$)",
        "{S} has {a:kind} named {name}.", sensitive: false, Durable, 0.9, entities: &[("name", "pet")]),
    rule!(Pet, r"^i\s+have\s+an?\s+(?P<kind>(?:[\p{L}-]+\s+)?(?:<PET>))\s+(?:named|called)\s+(?P<name><NAME>)\b",
        "{S} has {a:kind} named {name}.", sensitive: false, Durable, 0.9, entities: &[("name", "pet")]),
    rule!(Pet, r"^i\s+(?:have|own)\s+(?P<count>an?|one|<COUNT>)\s+(?P<kind>(?:[\p{L}-]+\s+)?(?:<PETS>|<PET>))\s*$",
        "{S} has {count} {kind}.", sensitive: false, Durable, 0.85),
    // Health constraints.
    rule!(Health, r"^<IM>\s+(?:(?:severely|very|highly|deathly|super|really|so|mildly|slightly)\s+)?allergic\s+to\s+(?P<x>.+)$",
        "{S} is allergic to {x}.", sensitive: true, Durable, 0.95),
    rule!(Health, r"^i\s+have\s+an?\s+(?:(?:severe|bad|mild|serious)\s+)?(?P<x>[\p{L}' -]{2,30}?)\s+(?P<kind>allergy|intolerance)\b",
        "{S} has {a:x} {kind}.", sensitive: true, Durable, 0.95),
    rule!(Health, r"^<IM>\s+(?:an?\s+)?(?:strict\s+)?(?P<x><DIET>)\s*$",
        "{S} is {x}.", sensitive: true, Durable, 0.9),
    rule!(Health, r"^i\s+(?P<verb>don't|do\s+not|can't|cannot|never)\s+eat\s+(?P<x>.+)$",
        "{S} {v:verb} eat {x}.", sensitive: true, Durable, 0.85),
    rule!(Health, r"^i\s+(?:was|got|have\s+been|'ve\s+been|am|'m)\s+(?:recently\s+|just\s+|finally\s+)?diagnosed\s+with\s+(?P<x>.+)$",
        "{S} was diagnosed with {x}.", sensitive: true, Durable, 0.9),
    rule!(Health, r"^i\s+(?:have|suffer\s+from|live\s+with|struggle\s+with)\s+(?P<x><CONDITION>)(?:\s*$|\s+(?:and|so|but|which|since)\b)",
        "{S} has {x}.", sensitive: true, Durable, 0.9),
    rule!(Health, r"^(?:<IM>\s+on|i\s+take)\s+(?P<x><MEDS>)",
        "{S} takes {x}.", sensitive: true, Durable, 0.85),
    // Plans with a resolvable date (the date phrase is removed before these match).
    rule!(Plan, r"^my\s+birthday\s+is\s*$",
        "{P} birthday is on {monthday}.", sensitive: true, Recurring, 0.9, needs_date: true),
    rule!(Plan, r"^<IM>\s+(?:(?:also|finally)\s+)?(?P<verb>going|heading|flying|traveling|travelling|driving|off|leaving|returning|going\s+back)\s+to\s+(?P<x>(?:the|a|an|my)\s+.+|(?-i:\p{Lu}).*)$",
        "{S} is {verb} to {x} on {date}.", sensitive: true, OneOff, 0.85, needs_date: true),
    rule!(Plan, r"^(?:<IM>\s+(?:going\s+to|gonna|planning\s+to)|i\s+plan\s+to|i(?:'ll|\s+will)|i\s+intend\s+to|i(?:'ve|\s+have)\s+(?:decided|planned)\s+to|<IM>\s+scheduled\s+to)\s+(?P<x>.+)$",
        "{S} plans to {x} on {date}.", sensitive: true, OneOff, 0.85, needs_date: true),
    rule!(Plan, r"^i(?:'ve|\s+have)?(?:\s+got)?\s+(?P<x>(?:an?|my)\s+(?:[\p{L}'-]+\s+){0,3}?(?:appointment|meeting|interview|exam|test|flight|surgery|operation|check-?up|party|wedding|concert|game|match|recital|presentation|deadline|date|trip|class|lesson|session|shift|conference|race|marathon|audition|hearing)\b.*)$",
        "{S} has {x} on {date}.", sensitive: true, OneOff, 0.85, needs_date: true),
    rule!(Plan, r"^<IM>\s+(?P<x>(?:visiting|seeing|meeting|hosting|attending|starting|getting\s+married|moving|running|celebrating|graduating|giving\s+birth)\s+\S.*)$",
        "{S} is {x} on {date}.", sensitive: true, OneOff, 0.8, needs_date: true),
    rule!(Plan, r"^my\s+(?P<thing>(?:[\p{L}'-]+\s+){0,2}?(?:appointment|meeting|interview|exam|flight|surgery|operation|wedding|party|concert|graduation|trip|due\s+date|deadline|first\s+day|move))\s+is(?:\s+(?:scheduled|set)\s+for)?\s*$",
        "{P} {thing} is on {date}.", sensitive: true, OneOff, 0.85, needs_date: true),
    // Preferences and dislikes.
    rule!(Preference, r"^i\s+(?:(?P<adv>really|absolutely|totally|truly|genuinely|also|especially|still)\s+)?(?P<verb>love|like|enjoy|adore|prefer)\s+(?:also\s+|still\s+)?(?P<liked>.+)$",
        "{S} [{adv} ]{v:verb} {liked}.", sensitive: false, Durable, 0.8),
    rule!(Preference, r"^i\s+(?:(?P<adv>really|absolutely|totally|truly|just|honestly)\s+)?(?P<verb>hate|dislike|detest|loathe|can't\s+stand|cannot\s+stand|don't\s+like|do\s+not\s+like|don't\s+enjoy|do\s+not\s+enjoy)\s+(?P<liked>.+)$",
        "{S} [{adv} ]{v:verb} {liked}.", sensitive: false, Durable, 0.8),
    rule!(Preference, r"^<IM>\s+not\s+(?:a\s+(?:big\s+|huge\s+)?fan\s+of|into)\s+(?P<liked>.+)$",
        "{S} is not a fan of {liked}.", sensitive: false, Durable, 0.8),
    rule!(Preference, r"^<IM>\s+(?:a\s+)?(?:(?:big|huge|massive|great|real|lifelong)\s+)?fan\s+of\s+(?P<liked>.+)$",
        "{S} is a fan of {liked}.", sensitive: false, Durable, 0.8),
    rule!(Preference, r"^<IM>\s+(?:really\s+|so\s+|very\s+|super\s+)?(?P<rel>into|passionate\s+about|obsessed\s+with)\s+(?P<liked>.+)$",
        "{S} is {rel} {liked}.", sensitive: false, Durable, 0.8),
    rule!(Preference, r"^my\s+(?:all[\s-]time\s+)?(?:favou?rite|fave)\s+(?P<thing>[\p{L} -]{2,30}?)\s+(?P<be>is|are)\s+(?P<x>.+)$",
        "{P} favorite {thing} {be} {x}.", sensitive: false, Durable, 0.85),
    rule!(Preference, r"^my\s+hobbies\s+(?:are|include)\s+(?P<x>.+)$",
        "{P} hobbies include {x}.", sensitive: false, Durable, 0.85),
    rule!(Preference, r"^i\s+(?P<verb>use|code\s+in|program\s+in|work\s+with)\s+(?P<x>(?-i:\p{Ll}{0,2}\p{Lu}[\p{L}\p{N}.+#-]*(?:\s+(?:\p{Lu}[\p{L}\p{N}.+#-]*|\d[\p{N}.]*))*))(?:\s+for\s+(?P<purpose>.+))?$",
        "{S} {v:verb} {x}[ for {purpose}].", sensitive: false, Durable, 0.8, entities: &[("x", "product")]),
    rule!(Preference, r"^i\s+(?P<verb>play|practice|practise)\s+(?P<x>(?:the\s+)?[\p{L}-]+(?:\s+[\p{L}-]+)?)\s*$",
        "{S} {v:verb} {x}.", sensitive: false, Durable, 0.75),
    rule!(Preference, r"^<IM>\s+learning\s+(?P<x>(?:to\s+)?[\p{L}-]+(?:\s+[\p{L}-]+){0,2})\s*$",
        "{S} is learning {x}.", sensitive: false, Durable, 0.75),
    // Routines: a first-person habit with an explicit repetition.
    rule!(Routine, r"^i\s+(?:(?P<adv>usually|always|normally|often|still)\s+)?(?P<habit>\p{L}+)\s+(?P<x>(?:\S+\s+){0,6}?)(?P<every><RECUR>)\s*$",
        "{S} [{adv} ]{v:habit} {x} {every}.", sensitive: true, Recurring, 0.8),
    rule!(Routine, r"^(?P<every><RECUR>),?\s+i\s+(?P<habit>\p{L}+)\s+(?P<x>.+)$",
        "{S} {v:habit} {x} {every}.", sensitive: true, Recurring, 0.8),
];

/// Phrases that make any memory sensitive whatever rule produced it: the rule categories miss
/// private details mentioned in passing ("I love cooking for my wife").
const SENSITIVE_PHRASES: &[&str] = &[
    "live in",
    "living in",
    "address",
    "allergic",
    "allergy",
    "diagnosed",
    "salary",
    "income",
    "i earn",
    "my wife",
    "my husband",
    "my partner",
    "my boyfriend",
    "my girlfriend",
    "my son",
    "my daughter",
    "my kids",
    "my children",
    "my mom",
    "my mum",
    "my dad",
    "my mother",
    "my father",
    "my family",
    "medication",
    "therapy",
    "therapist",
    "pregnant",
    "surgery",
    "doctor",
    "hospital",
    "phone number",
    "email address",
    "password",
    "my boss",
    "work at",
    "work for",
    "moving to",
    "born in",
    "birthday",
    "my ex",
    "divorce",
    "debt",
];

/// Whether a clause mentions something private regardless of the rule that matched it.
pub(crate) fn mentions_private_detail(clause: &str) -> bool {
    let lower = clause.to_lowercase();
    SENSITIVE_PHRASES.iter().any(|phrase| lower.contains(phrase))
}

/// Words that look like names when capitalised but never are one.
const NOT_NAMES: &[&str] = &[
    "i",
    "i'm",
    "im",
    "the",
    "a",
    "an",
    "my",
    "me",
    "we",
    "you",
    "he",
    "she",
    "it",
    "they",
    "this",
    "that",
    "here",
    "there",
    "so",
    "not",
    "just",
    "also",
    "still",
    "really",
    "very",
    "too",
    "sure",
    "sorry",
    "fine",
    "good",
    "great",
    "glad",
    "happy",
    "excited",
    "okay",
    "ok",
    "back",
    "home",
    "done",
    "ready",
    "well",
    "busy",
    "tired",
    "going",
    "gonna",
    "doing",
    "thanks",
    "thank",
    "lol",
    "haha",
    "yes",
    "no",
    "yeah",
    "hey",
    "hi",
    "hello",
    "god",
    "mom",
    "mum",
    "dad",
    "today",
    "tomorrow",
    "yesterday",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "january",
    "february",
    "march",
    "april",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "christmas",
    "easter",
    "everyone",
    "nobody",
    "someone",
    "anyway",
    "and",
    "but",
    "or",
    "because",
    "what",
    "when",
    "where",
    "why",
    "how",
    "who",
    "afraid",
    "alright",
    "curious",
    "confused",
    "lost",
    "bored",
    "all",
    "in",
    "on",
    "out",
    "off",
    "up",
    "down",
    "over",
    "now",
    "always",
    "never",
];

/// Verbs a routine may not start with: they describe feelings or states, not habits.
const NOT_ROUTINE_VERBS: &[&str] = &[
    "am", "was", "feel", "felt", "think", "thought", "hope", "wish", "guess", "mean", "need", "want", "wanted", "miss",
    "missed", "get", "got", "see", "saw", "say", "said", "know", "knew", "forget", "forgot", "love", "like", "hate",
    "enjoy",
];

/// Groups captured verbatim: their patterns pin them to a few literal words ("at", "don't like",
/// "they/them"), which the free-text checks would wrongly read as cut-off or deictic.
pub(crate) const VERBATIM_GROUPS: &[&str] = &[
    "pronouns", "age", "year", "count", "langs", "prep", "verb", "habit", "adv", "rel", "kind", "status", "be",
    "which", "every", "now", "later",
];
/// Group names whose captured words must all be plausible names.
const NAME_GROUPS: &[&str] = &["name", "nick"];
/// Group names whose first word must be a plausible name.
const PLACE_GROUPS: &[&str] = &["place", "org"];

/// A rule with its compiled pattern.
pub(crate) struct CompiledRule {
    pub rule: &'static Rule,
    pub regex: Regex,
}

/// Every rule, compiled once.
pub(crate) static COMPILED: LazyLock<Vec<CompiledRule>> = LazyLock::new(|| {
    RULES
        .iter()
        .map(|rule| CompiledRule {
            rule,
            regex: Regex::new(&expand(rule.pattern))
                .expect("rule patterns are fixed literals; the every_rule_compiles test builds each one"),
        })
        .collect()
});

/// The recurring-phrase pattern on its own, to mark otherwise durable facts as recurring.
pub(crate) static RECURRING: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r"(?i)\b(?:{})\b", fragment("<RECUR>")))
        .expect("the recurrence fragment is a fixed literal also compiled inside the rule table")
});

fn fragment(key: &str) -> &'static str {
    FRAGMENTS
        .iter()
        .find(|(name, _)| *name == key)
        .map_or("", |(_, value)| value)
}

/// Splices fragments into a pattern and makes it case-insensitive.
pub(crate) fn expand(pattern: &str) -> String {
    let mut expanded = pattern.to_owned();
    for (name, value) in FRAGMENTS {
        expanded = expanded.replace(name, value);
    }
    format!("(?i){expanded}")
}

/// Whether a captured group's words are acceptable for what the group names.
pub(crate) fn plausible(group: &str, value: &str) -> bool {
    let is_not_name = |word: &str| NOT_NAMES.contains(&word.to_lowercase().trim_end_matches('.'));
    if NAME_GROUPS.contains(&group) {
        return !value.split_whitespace().any(is_not_name);
    }
    if PLACE_GROUPS.contains(&group) {
        let mut words = value.split_whitespace();
        let first = match words.next() {
            Some(word) if word.eq_ignore_ascii_case("the") => words.next(),
            other => other,
        };
        // Lowercase openings ("a small startup") come from the generic alternative, not a name.
        let capitalised = first
            .and_then(|word| word.chars().next())
            .is_some_and(char::is_uppercase);
        return !capitalised || first.is_some_and(|word| !is_not_name(word));
    }
    if group == "liked" {
        return plausible_liking(value);
    }
    if group == "habit" {
        return !NOT_ROUTINE_VERBS.contains(&value.to_lowercase().as_str());
    }
    if group == "age" {
        return value.parse::<u32>().is_ok_and(|age| (1..=120).contains(&age));
    }
    true
}

/// Whether a liked or disliked thing is a lasting kind of thing rather than one item in view:
/// "the ocean" or "a mousse" usually point at what is being discussed, "the Beatles" and
/// "jazz" do not.
fn plausible_liking(value: &str) -> bool {
    let mut words = value.split_whitespace();
    let first = words.next().unwrap_or("").to_lowercase();
    let second_is_capitalised = words
        .next()
        .and_then(|word| word.chars().next())
        .is_some_and(char::is_uppercase);
    match first.as_str() {
        "the" => second_is_capitalised,
        "a" | "an" | "all" | "both" | "such" | "so" | "how" | "what" | "seeing" | "hearing" | "reading" | "talking"
        | "chatting" => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_compiles() {
        for rule in RULES {
            assert!(Regex::new(&expand(rule.pattern)).is_ok(), "{}", rule.pattern);
        }
        assert_eq!(COMPILED.len(), RULES.len());
        assert!(RECURRING.is_match("I swim every Monday"));
    }

    #[test]
    fn every_fragment_reference_is_known() {
        for rule in RULES {
            let expanded = expand(rule.pattern);
            for (name, _) in FRAGMENTS {
                assert!(!expanded.contains(name), "{name} left in {}", rule.pattern);
            }
        }
    }

    #[test]
    fn names_reject_common_capitalised_words() {
        assert!(plausible("name", "Caroline"));
        assert!(!plausible("name", "Sure"));
        assert!(!plausible("place", "Monday"));
        assert!(plausible("place", "the Netherlands"));
        assert!(!plausible("age", "400"));
        assert!(plausible("liked", "the Beatles"));
        assert!(!plausible("liked", "the energy"));
        assert!(!plausible("liked", "a chocolate mousse"));
    }
}
