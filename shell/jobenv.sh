# jobenv shell integration for bash and zsh.  Add to ~/.bashrc or ~/.zshrc:
#     source /path/to/jobenv/shell/jobenv.sh
#
#   savejobenv [ARGS]   inside the allocation: capture the job (jobenv save ARGS)
#   getjobenv  [ARGS]   in any other shell: restore the job and define `launch`
#
# getjobenv sources the saved env file directly (no Python start-up) when that is
# safe: no arguments, exactly one record whose JSON is not older than its env file,
# and no scheduler variables in this shell.  Otherwise it asks `jobenv get`, which
# chooses among jobs, checks that the job is alive, and clears variables of other jobs.

savejobenv() {
    command jobenv save "$@"
}

getjobenv() {
    local _jh _f _n _json
    if [ "$#" -eq 0 ] && [ -z "${SLURM_JOB_ID-}${PBS_JOBID-}${COBALT_JOBID-}" ]; then
        _jh="${JOBENV_HOME:-$HOME/.jobenv}/jobs"
        _n=0
        for _f in "$_jh"/*.env; do
            [ -f "$_f" ] || continue
            _n=$((_n + 1))
            _json="${_f%.env}.json"
        done
        if [ "$_n" -eq 1 ] && [ -O "$_jh" ] && [ -O "$_json" ] && [ ! "$_json" -nt "$_f" ] \
            && ! grep -q '"state": "ended"' "$_json" 2>/dev/null; then
            . "${_json%.json}.env"
            return $?
        fi
    fi
    local _snippet
    _snippet="$(command jobenv get "$@")" || return $?
    eval "$_snippet"
}
