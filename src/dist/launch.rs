//! What the launcher says about the job before MPI starts: how many ranks it started, and how
//! many of them share this node (which sets the CPU threads each rank takes).
//!
//! Open MPI's `mpirun` sets `OMPI_COMM_WORLD_SIZE` and `OMPI_COMM_WORLD_LOCAL_SIZE`; `srun`
//! sets `SLURM_STEP_NUM_TASKS` and `SLURM_STEP_TASKS_PER_NODE` (with `PMIX_RANK` under
//! `--mpi=pmix`, `PMI_SIZE` under PMI-2).

/// The number of ranks a launcher started, if one started this process.
pub fn launched_ranks() -> Option<usize> {
    from_env(&|k| std::env::var(k).ok())
}

/// The number of ranks on this node, if a launcher says.
pub fn local_ranks() -> Option<usize> {
    local_from_env(&|k| std::env::var(k).ok())
}

/// CPU threads for each rank: the node's cores shared evenly between its ranks (at least one);
/// `None` for a lone process or when `RAYON_NUM_THREADS` chooses.
pub fn threads_per_rank() -> Option<usize> {
    if std::env::var_os("RAYON_NUM_THREADS").is_some() {
        return None;
    }
    let local = local_ranks().filter(|&n| n > 1)?;
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    Some((cores / local).max(1))
}

fn from_env(var: &dyn Fn(&str) -> Option<String>) -> Option<usize> {
    let num = |k: &str| var(k).and_then(|v| v.trim().parse::<usize>().ok());
    if let Some(n) = num("OMPI_COMM_WORLD_SIZE") {
        return Some(n);
    }
    // srun starts MPI ranks with PMIx or PMI-2; a plain `srun` of one task sets neither.
    if var("PMIX_RANK").is_some() || var("PMI_RANK").is_some() {
        return num("SLURM_STEP_NUM_TASKS").or_else(|| num("PMI_SIZE"));
    }
    None
}

fn local_from_env(var: &dyn Fn(&str) -> Option<String>) -> Option<usize> {
    if let Some(n) = var("OMPI_COMM_WORLD_LOCAL_SIZE").and_then(|v| v.trim().parse().ok()) {
        return Some(n);
    }
    // Slurm: "2(x3),1" = two tasks on each of three nodes, then one; this node's is
    // SLURM_LOCALID's block, but every block's count is at most the first's.
    let per_node = var("SLURM_STEP_TASKS_PER_NODE")?;
    per_node.split(',').next()?.split('(').next()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let v: Vec<(String, String)> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k| v.iter().find(|(key, _)| key == k).map(|(_, val)| val.clone())
    }

    #[test]
    fn the_launchers_environment_gives_the_rank_count() {
        assert_eq!(from_env(&env(&[])), None);
        assert_eq!(from_env(&env(&[("OMPI_COMM_WORLD_SIZE", "4")])), Some(4));
        let srun = [("PMIX_RANK", "1"), ("SLURM_STEP_NUM_TASKS", "8")];
        assert_eq!(from_env(&env(&srun)), Some(8));
        // A batch script's own environment (no srun step with an MPI plugin) is not a launch.
        assert_eq!(from_env(&env(&[("SLURM_NTASKS", "8"), ("SLURM_STEP_NUM_TASKS", "8")])), None);
        assert_eq!(local_from_env(&env(&[("OMPI_COMM_WORLD_LOCAL_SIZE", "2")])), Some(2));
        assert_eq!(local_from_env(&env(&[("SLURM_STEP_TASKS_PER_NODE", "4(x2),1")])), Some(4));
        assert_eq!(local_from_env(&env(&[])), None);
    }
}
