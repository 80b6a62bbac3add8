# jobenv shell integration for bash and zsh.  Add to ~/.bashrc or ~/.zshrc:
#     source /path/to/jobenv/shell/jobenv.sh
#
#   savejobenv [ARGS]   inside the allocation: capture the job (jobenv save ARGS)
#   getjobenv  [ARGS]   in any other shell: restore the job and define `launch`
#
# getjobenv decides nothing itself.  Without Python it sources only the snippet that
# `jobenv get` wrote for this host after its own checks ($JOBENV_HOME/cache/host-<host>.sh),
# and only while the proof in that snippet's header still holds: one `stat` prints exactly
# the lines recorded there for the store directory, the jobs directory and the record
# (same type, owner, mode, device, inode, links, size and times: nothing was saved,
# removed, edited, chmod-ed or replaced by a link since), for the cache directory and
# every directory above the store that `jobenv get` judged (same type, owner, mode, device
# and inode: none was made writable by others or swapped), the snippet is a regular file
# of ours, mode 600, one link, of the recorded size, its liveness verdict was reached no
# later than this shell's clock reads and has not expired, and this shell's LOADEDMODULES
# is the one it was computed for (the modules warning).
# The snippet is opened once: its header is read, its `stat` taken and its text sourced
# through that one descriptor (/proc/self/fd/9 reopens the same file, whatever its name
# holds by then), so what was proven is what runs.
# That fast path serves shells with no arguments, no scheduler job's marks, no site variable
# of a scheduler (the snippet was computed for such a shell, and the restore plan is the
# same for all of them); every other case runs `jobenv get`.

# An alias of one of these names (say, an old `alias getjobenv='source <(jobenv get)'`)
# would be expanded inside the definitions below and break them.
unalias savejobenv getjobenv _jobenv_get _jobenv_where _jobenv_cached >/dev/null 2>&1 || true

savejobenv() {
    [ -z "${ZSH_VERSION-}" ] || emulate -L zsh
    command "${JOBENV_EXE:-jobenv}" save "$@"
}

# The user's shell options must not change what this code means: zsh runs it under
# `emulate -L zsh`; bash has no such switch, so nothing here assigns on a `local` line,
# and `set -k` (which would make the snippet's `export A=1` the environment of `export`
# and assign nothing) is off while it runs.
getjobenv() {
    [ -z "${ZSH_VERSION-}" ] || emulate -L zsh
    case $- in
        *k*) if [ -n "${BASH_VERSION-}" ]; then set +k; _jobenv_get "$@"; set -- "$?"; set -k; return "$1"; fi ;;
    esac
    _jobenv_get "$@"
}

_jobenv_get() {
    if [ "$#" -eq 0 ] && _jobenv_where; then
        { if _jobenv_cached; then unset _jobenv_f; . /proc/self/fd/9; fi; } 9<"$_jobenv_f"
        set -- "$?"
        if [ -z "${_jobenv_f+x}" ]; then  # restored from the proven snippet: say which job, as `get` does
            [ "$1" -ne 0 ] || ! [ -t 2 ] || printf 'jobenv: restored %s job %s; -j ID restores another\n' \
                "${JOBENV_SCHEDULER-}" "${JOBENV_JOBID-}" >&2
            return "$1"
        fi
        set --  # not proven: `jobenv get` decides, with no arguments as asked
    fi
    unset _jobenv_f
    local _jobenv_snippet _jobenv_sh
    _jobenv_sh=sh
    if [ -n "${ZSH_VERSION-}" ]; then _jobenv_sh=zsh; elif [ -n "${BASH_VERSION-}" ]; then _jobenv_sh=bash; fi
    _jobenv_snippet="$(command "${JOBENV_EXE:-jobenv}" get --shell "$_jobenv_sh" "$@")" || return $?
    eval "$_jobenv_snippet"
}

# Succeeds, with _jobenv_f set to the snippet's path, when this shell may take the fast
# path and a snippet is there to prove.  bash and zsh only (the snippet is their dialect);
# other shells always ask `jobenv get`.
_jobenv_where() {
    local d h
    if [ -n "${ZSH_VERSION-}" ]; then
        emulate -L zsh
    elif [ -z "${BASH_VERSION-}" ]; then
        return 1
    fi
    # a job's marks: schedulers.JOB_MARKERS; site variables: plan.SITE_VARS (python -m jobenv.schedulers.render)
    [ -z "${FLUX_ENCLOSING_ID-}${FLUX_JOB_ID-}${PBS_JOBID-}${PBS_NODEFILE-}${SLURM_JOB_ID-}${SLURM_JOBID-}\
${SLURM_JOB_NODELIST-}${SLURM_NODELIST-}${LSB_JOBID-}${LSB_MCPU_HOSTS-}${LSB_DJOB_HOSTFILE-}${LSB_HOSTS-}\
${COBALT_JOBID-}${COBALT_NODEFILE-}" ] || return 1
    [ -z "${PBS_SERVER+x}${PBS_CONF_FILE+x}${PBS_EXEC+x}${PBS_HOME+x}${PBS_DEFAULT+x}${PBS_SERVER_NAME+x}\
${SLURM_CONF+x}${SLURM_TIME_FORMAT+x}${SLURM_CLUSTERS+x}${SLURM_CONFIG_DIR+x}${LSF_ENVDIR+x}${LSF_BINDIR+x}\
${LSF_LIBDIR+x}${LSF_SERVERDIR+x}${LSF_VERSION+x}${COBALT_CONFIG_FILES+x}" ] \
        || return 1
    d="${JOBENV_HOME:-${HOME:+$HOME/.jobenv}}"
    case "$d" in /*) ;; *) return 1 ;; esac
    h="${JOBENV_HOSTNAME-}"
    [ -n "$h" ] || IFS= read -r h </proc/sys/kernel/hostname 2>/dev/null || return 1
    case "$h" in '' | .* | *[!A-Za-z0-9._-]*) return 1 ;; esac
    [ "${#h}" -le 200 ] || return 1
    _jobenv_f="${d%/}/cache/host-$h.sh"
    [ -f "$_jobenv_f" ] && [ ! -h "$_jobenv_f" ] && [ -O "$_jobenv_f" ]
}

# Succeeds when the snippet open on descriptor 9 (_jobenv_f's, see above) may be sourced.
_jobenv_cached() {
    local d l l1 l2 l3 l4 l5 s1 s2 s3 c m out want nl up got
    up= got=
    if [ -n "${ZSH_VERSION-}" ]; then
        emulate -L zsh
        zmodload -F zsh/datetime p:EPOCHSECONDS 2>/dev/null || return 1
    fi
    eval "nl=\$'\\n'"
    [ -n "${EPOCHSECONDS-}" ] && [ -n "${EUID-}" ] || return 1
    d="${_jobenv_f%/cache/*}"
    set --  # the directories above the store, from the `# above SIG|PATH` lines
    {
        IFS= read -r l1 && IFS= read -r l2 && IFS= read -r l3 && IFS= read -r l4 && IFS= read -r l5 \
            && IFS= read -r s1 && IFS= read -r s2 && IFS= read -r s3 && IFS= read -r c && IFS= read -r m \
            || return 1
        while IFS= read -r l; do
            case "$l" in
                '# end') break ;;
                '# above '*'|/'*) [ "$#" -lt 64 ] || return 1
                    l="${l#'# above '}"
                    set -- "$@" "/${l#*'|/'}"
                    up="$up${l%%'|/'*}$nl" ;;
                *) return 1 ;;
            esac
        done
    } <&9
    [ "$l1" = '# jobenv restore cache 4 (written by `jobenv get` after its checks; do not edit)' ] \
        && [ "$l" = '# end' ] && [ "$m" = "# modules ${LOADEDMODULES-}" ] || return 1
    case "$l2$l3$l4$l5$s1$s2$s3$c" in
        '# size '*'# since '*'# until '*'# record '*'# stat '*'# stat '*'# stat '*'# cache '*) ;;
        *) return 1 ;;
    esac
    l2="${l2#'# size '}" l3="${l3#'# since '}" l4="${l4#'# until '}" l5="${l5#'# record '}"
    case "$l2" in '' | *[!0-9]*) return 1 ;; esac
    case "$l3$l4" in '' | *[!0-9]*) return 1 ;; esac
    case "$l5" in '' | /* | *..* | *[!A-Za-z0-9._/-]*) return 1 ;; esac
    # the verdict holds from `since` (a clock stepped back voids it) until `until`
    [ "${#l2}" -eq 10 ] && [ "${#l3}" -le 12 ] && [ "${#l4}" -le 12 ] && [ "$l3" -le "$EPOCHSECONDS" ] \
        && [ "$EPOCHSECONDS" -lt "$l4" ] || return 1
    # LC_ALL=C: %F in English, as the proof records it; `-` is the open snippet itself
    out="$(LC_ALL=C LANGUAGE= command stat -c '%F|%u|%a|%d|%i|%h|%s|%Y|%Z' -- "$@" "$d/cache" \
        "$d" "$d/jobs" "$d/jobs/$l5" - <&9 2>/dev/null)" || return 1
    up="$up${c#'# cache '}$nl"
    set -- "$@" "$d/cache"
    while [ "$#" -gt 0 ]; do  # a directory above, and cache/: type, owner, mode, device, inode (not its times)
        l="${out%%"$nl"*}" out="${out#*"$nl"}"
        got="$got${l%'|'*'|'*'|'*'|'*}$nl"
        shift
    done
    [ "$got" = "$up" ] || return 1
    want="${s1#'# stat '}$nl${s2#'# stat '}$nl${s3#'# stat '}${nl}regular file|$EUID|600|"
    case "$out" in "$want"[0-9]*'|'[0-9]*"|1|$((10#$l2))|"[0-9]*'|'[0-9]*) ;; *) return 1 ;; esac
    [ -r /proc/self/fd/9 ]  # what the caller sources (no /proc: `jobenv get`)
}
