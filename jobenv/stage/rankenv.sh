# jobenv stage: run a rank with this host's staged copy of the environment first on PATH.
# Usage: sh rankenv.sh TEMPLATE KEY COMMAND [ARG...]  (stage.restore.rank_prefix writes it
# from the record): TEMPLATE is the copy's path, `%h` standing for the host name, KEY the
# manifest key the record holds for it.
# The copy is run only under the rule of stage.restore.check_copy: the stage directory and
# the copy are real directories (no symlink) of this user, not writable by group/others,
# and the copy's stamp carries KEY.  The directories above were checked when staging, and
# only their owners (root or this user) can change them since; a directory someone else
# re-creates in their place is theirs, so the copy below it fails the ownership test.
# Anything else: a warning (none where there is no copy at all), the copy leaves PATH and
# VIRTUAL_ENV / CONDA_PREFIX, and the rank runs from the shared environment.
# POSIX sh, once per rank: builtins only, plus one `find` for the two modes, looked up on
# the system's default PATH (`command -p`), never on the rank's: its first entry may be
# the very copy under check, and whoever can write that copy could supply the `find`.
p=$1 k=$2
shift 2
case $p in
*%h*)
    h=
    read -r h < /proc/sys/kernel/hostname 2>/dev/null || h=$(uname -n)
    out=
    while :; do
        case $p in
        *%h*) out=$out${p%%"%h"*}$h; p=${p#*"%h"} ;;
        *) break ;;
        esac
    done
    p=$out$p ;;
esac
d=${p%/*}
why=
if [ ! -d "$p" ]; then
    why=-
elif [ -h "$p" ] || [ -h "$d" ] || [ ! -O "$p" ] || [ ! -O "$d" ]; then
    why="it or its directory is not a directory of your own"
else
    s=
    { IFS= read -r s || :; } < "$p/.jobenv-stage.json" 2>/dev/null
    case $s in
    "{\"key\": \"$k\","*)
        bad=$(command -p find "$d" "$p" -prune \( -perm -020 -o -perm -002 \) -print 2>&1) || bad=${bad:-find failed}
        [ -z "$bad" ] || why="writable by others: $bad" ;;
    *) why="it is not the recorded copy" ;;
    esac
fi
if [ -z "$why" ]; then
    PATH=$p/bin:$PATH
    export PATH
    if [ -d "$p/conda-meta" ]; then CONDA_PREFIX=$p; export CONDA_PREFIX
    else VIRTUAL_ENV=$p; export VIRTUAL_ENV; fi
else
    [ "$why" = - ] || echo "jobenv: warning: not using the staged copy $p on ${h:-this host}: $why; running from the shared environment" >&2
    rest=$PATH: PATH= sep=
    while [ -n "$rest" ]; do
        e=${rest%%:*}; rest=${rest#*:}
        [ "$e" = "$p/bin" ] || { PATH=$PATH$sep$e; sep=:; }
    done
    [ "${VIRTUAL_ENV-}" != "$p" ] || unset VIRTUAL_ENV
    [ "${CONDA_PREFIX-}" != "$p" ] || unset CONDA_PREFIX
fi
exec "$@"
