//! The mixture of experts:
//!
//! - [`block`]: the block: routed and shared experts, the dispatch, the capacity factor
//! - [`options`]: `[model.moe]`, its sizes, router and balancing coefficients
//! - [`router`]: the one table of router kinds and their routing
//! - [`balance`]: the load-balancing loss, the router z-loss, DeepSeek V3's bias update, and
//!   the routing's record and readings

pub mod balance;
pub mod block;
pub mod options;
pub mod router;

#[cfg(test)]
mod tests;
