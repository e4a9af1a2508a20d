//! `normlab report DIR`: a self-contained HTML page (figures inlined as SVG), the figures as
//! PNG and SVG files, and a markdown summary, for a sweep directory or a single run.
//!
//! - [`plot`]: charts with plotters (pure-Rust fonts)
//! - [`data`]: what is read from run directories
//! - [`figures`]: the figures, in the papers' styles
//! - [`findings`]: which scheme wins here and why, in words
//! - [`finetune`]: a sweep's fine-tuning stage ranked, and a fine-tuning run beside its parent
//! - [`page`]: the report's text as markdown and HTML
//! - [`scaling`]: a scaling study's laws, gaps and findings
//! - [`tasks`]: downstream tasks against the learning rate, and whether they rank as the loss does
//! - [`textnorm`]: exact match, F1 and gradient-norm CV of pairs runs (the Normalization chapter's build)
//! - [`table`]: the ranked table, its notes and the setup line
//! - [`assemble`]: which sections a directory's report has, and writing it
//! - [`gates`]: learned residual gates and attention-logit maxima
//! - [`spikes`]: gradient-norm spikes against the learning rate
//! - [`routing`]: a mixture-of-experts sweep's load balance, dead experts and dropped pairs at LR*
//! - [`separation`]: the rounds of seeds added until adjacent ranks separate
//! - [`sources`]: a mixture's validation loss per source
//! - [`signals`]: bounded norms' saturation and the output logits' log Z as figures
//! - [`optimizers`]: the recipes ranked under each optimizer of a sweep that varies `optim.name`
//! - [`paper`], [`paper_tasks`], [`paper_sft`]: published tables beside the sweep's results

mod assemble;
pub mod data;
pub mod figures;
pub mod findings;
pub mod finetune;
pub mod gates;
pub mod optimizers;
pub mod page;
pub mod paper;
pub mod paper_sft;
pub mod paper_tasks;
pub mod plot;
pub mod routing;
pub mod scaling;
pub mod separation;
pub mod signals;
pub mod sources;
pub mod spikes;
pub mod table;
pub mod tasks;
pub mod textnorm;

pub use assemble::{Report, generate};
pub use table::{score_cell, setup_text, summary_table, table_notes, task_keys};
