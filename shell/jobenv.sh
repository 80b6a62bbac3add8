# jobenv shell integration for bash and zsh.  Add to ~/.bashrc or ~/.zshrc:
#     source /path/to/jobenv/shell/jobenv.sh
#
#   savejobenv [ARGS]   inside the allocation: capture the job (jobenv save ARGS)
#   getjobenv  [ARGS]   in any other shell: restore the job and define `launch`
#
# getjobenv sources the saved env file directly, without starting Python, when that is
# clearly right: no arguments, no scheduler variables in this shell, exactly one record,
# owned by you, not marked ended, with no heartbeat to judge, and this host in its host
# list.  In every other case it asks `jobenv get`, which chooses among jobs, asks the
# scheduler whether the job is alive, and clears variables of other jobs.

savejobenv() {
    command "${JOBENV_EXE:-jobenv}" save "$@"
}

getjobenv() {
    if [ "$#" -eq 0 ] && [ -z "${SLURM_JOB_ID-}${PBS_JOBID-}${COBALT_JOBID-}" ]; then
        local _jobenv_dir _jobenv_f _jobenv_json= _jobenv_n=0 _jobenv_host
        _jobenv_dir="${JOBENV_HOME:-$HOME/.jobenv}/jobs"
        for _jobenv_f in "$_jobenv_dir"/*.json; do
            [ -f "$_jobenv_f" ] || continue
            _jobenv_n=$((_jobenv_n + 1))
            _jobenv_json="$_jobenv_f"
        done
        _jobenv_host="${JOBENV_HOSTNAME:-${HOSTNAME:-${HOST:-}}}"
        _jobenv_host="${_jobenv_host%%.*}"
        if [ "$_jobenv_n" -eq 1 ] && [ -n "$_jobenv_host" ] && [ -O "$_jobenv_dir" ] \
            && [ -O "$_jobenv_json" ] && [ -O "${_jobenv_json%.json}.env" ] \
            && ! grep -qE '"state": "ended"|"heartbeat"' "$_jobenv_json" \
            && grep -qE "^${_jobenv_host}(\.|\$)" "${_jobenv_json%.json}.hosts" 2>/dev/null; then
            . "${_jobenv_json%.json}.env"
            return $?
        fi
    fi
    local _jobenv_snippet
    _jobenv_snippet="$(command "${JOBENV_EXE:-jobenv}" get "$@")" || return $?
    eval "$_jobenv_snippet"
}
