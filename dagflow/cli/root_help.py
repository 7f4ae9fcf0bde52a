"""The root help of `dagflow --help` (cli/quick.py), written by `python -m dagflow.cli.write_root_help`
from the typer app: edit the commands, then run it. COMMANDS: (name, help, the command module
registering it)."""
# ruff: noqa: E501

USAGE = 'Usage: dagflow [OPTIONS] COMMAND [ARGS]...'
HELP = ('Run ML pipelines as workflow DAGs.', 'Typical flow: `dagflow validate pipeline.yaml`, `dagflow plan pipeline.yaml`, then either `dagflow run pipeline.yaml` (on this machine) or `dagflow compile pipeline.yaml -o DIR` (HTCondor DAGMan files).')
OPTIONS = (
    ('--version', '<bool>', 'Print the version and exit.'),
    ('--install-completion', '<bool>', 'Install completion for the current shell.'),
    ('--show-completion', '<bool>', 'Show completion for the current shell, to copy it or customize the installation.'),
    ('--help', '<bool>', 'Show this message and exit.'),
)
COMMANDS = (
    ('validate', 'Check a pipeline file and report every problem at once.', 'spec_cmds'),
    ('schema', 'Print the JSON Schema of pipeline files.', 'spec_cmds'),
    ('plan', 'Show the expanded DAG: every node with its matrix coordinates, resources and parents.', 'spec_cmds'),
    ('compile', 'Compile a pipeline into HTCondor DAGMan input, ready for condor_submit_dag.', 'condor_cmds'),
    ('lint', 'Check DAGMan input files before you submit them (DAGMan itself only checks at submit time).', 'condor_cmds'),
    ('run', 'Run a pipeline and wait for it: on this machine by default (nodes in parallel, retries, timeouts, caching, resume), or on a batch engine with --engine.', 'run_cmds'),
    ('status', "Show a run's state: counts per node state and a table of nodes.", 'run_cmds'),
    ('logs', "Print a node's stdout (or stderr, with --err) from a run.", 'run_cmds'),
    ('submit', 'Submit a pipeline to an engine and return once it holds the work.', 'submit_cmds'),
    ('resubmit', 'Submit a failed or cancelled run again, on the engine that started it; what finished is not rerun.', 'submit_cmds'),
    ('cancel', 'Stop a submitted run with the engine that started it: remove its DAGMan job, scancel its Slurm jobs, or stop its local runner.', 'submit_cmds'),
    ('transfer', 'Copy what is under SRC into DST, skipping what is already there with the same content.', 'transfer_cmds'),
    ('publish', "Upload a train step's outputs to its `publish:` location (what a <step>.publish node runs).", 'transfer_cmds'),
    ('promote', "Move the pointer to the new model only if its metric beats the current model's (a <step>.promote node).", 'transfer_cmds'),
    ('autoscale', 'Scale EC2 Auto Scaling groups to the idle jobs in the schedd; drain idle nodes before removing them.', 'autoscale_cmds'),
    ('report', "Write one self-contained HTML page about a run: the DAG with node states, a timeline per machine slot, resources used against requested per step (waste called out), metrics and promotion verdicts per region, and for a search's trial run the search's convergence plot and trials. It needs no network to view. Works for runs of every engine.", 'report_cmds'),
    ('runs', 'List the runs dagflow knows of (every pipeline directory used), or remove old ones with `runs gc`.', 'runs_cmds'),
    ('schedule', 'Run a pipeline on its schedule: block, from your crontab or as an HTCondor cron job.', 'schedule_cmds'),
    ('agent', 'Node agent: configure this execute node for the pool at boot, and drain it on EC2 spot notices.', 'agent_cmds'),
    ('search', "Bayesian hyperparameter search: `dagflow search run pipeline.yaml` (the pipeline's search: block), `dagflow search --spearmint DIR` (a Spearmint experiment), `dagflow search status NAME`.", 'search_cmds'),
    ('resources', 'Resource requests learned from history: what past runs of a pipeline used.', 'resources_cmds'),
)
