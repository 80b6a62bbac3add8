"""A pre-empted PBS job's resubmission (jobenv.schedulers.pbs_requeue): Submit_arguments read
the way qsub records it and qstat prints it, and the script PBS ran found on the mother superior.

No PBS server runs here: `qstat -f -F json` documents are built the way openpbs writes them
(src/cmds/qsub.c stores argv as XML-escaped <jsdl-hpcpa:Argument> elements;
src/lib/Libifl/xml_encode_decode.c's decode_xml_arg_list_str gives them back joined with
one space; src/cmds/qstat.c prints that through cJSON, `"key":<TAB>value` with tabs, -v's
list split at unescaped commas into an object whose values cJSON parses when they are JSON).
"""
from __future__ import annotations

import json
import os

import pytest

from jobenv.schedulers import pbs_qstat, pbs_requeue

JOBID = "4242.pbs-server"


def xml_args(argv):
    """qsub's encode_xml_arg_list."""
    esc = {"<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;", "&": "&amp;"}
    return "".join("<jsdl-hpcpa:Argument>" + "".join(esc.get(c, c) for c in a) + "</jsdl-hpcpa:Argument>" for a in argv)


def qstat_decoded(xml):
    """qstat's decode_xml_arg_list_str: the arguments, unescaped, joined with one space."""
    import re

    unesc = {"&lt;": "<", "&gt;": ">", "&quot;": '"', "&apos;": "'", "&amp;": "&"}
    words = [t for t in re.split(r"[<>]", xml) if t and "jsdl-hpcpa:Argument" not in t]
    return " ".join(re.sub(r"&[a-z]+;", lambda m: unesc[m.group(0)], w) for w in words)


def cjson_value(text):
    """pbs_json_insert_parsed: a value that parses as JSON is that JSON, else a string."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def variable_list(items):
    """Variable_List as qstat's prt_attr splits it (at commas not escaped by a backslash)."""
    out = {}
    for k, v in items:
        out[k] = cjson_value(v)
    return out


def qstat_json(qsub_argv, job_name, variables=(), **attrs):
    """`qstat -f -F json JOBID` of a job submitted with `qsub_argv`, as PBS 2022 prints it."""
    job = {"Job_Name": job_name, "Job_Owner": "alice@login1", "job_state": "R", "queue": "workq",
           "Rerunable": "True", "run_count": 1,
           "Output_Path": f"login1:/home/alice/proj/{job_name}.o4242",
           "Error_Path": f"login1:/home/alice/proj/{job_name}.e4242",
           "Variable_List": variable_list([("PBS_O_HOME", "/home/alice"), ("PBS_O_WORKDIR", "/home/alice/proj"),
                                           *variables]),
           "euser": "alice", **attrs}
    if qsub_argv:
        job["Submit_arguments"] = qstat_decoded(xml_args(qsub_argv))
    doc = {"timestamp": 1772464504, "pbs_version": "2022.1.5", "pbs_server": "pbs-server", "Jobs": {JOBID: job}}
    return json.dumps(doc, indent="\t", separators=(",", ":\t"), ensure_ascii=False)


def test_plain_arguments_are_qsubs_words():
    facts = pbs_requeue.parse_show(qstat_json(["-l", "select=2:ncpus=4", "-l", "walltime=01:00:00", "-q", "workq",
                                               "-A", "proj1", "-r", "y", "job.sh"], "job.sh", Account_Name="proj1"))
    assert facts.why == "" and facts.workdir == "/home/alice/proj"
    assert facts.submit == ("-l", "select=2:ncpus=4", "-l", "walltime=01:00:00", "-q", "workq", "-A", "proj1",
                            "-r", "y")
    # attached values, bundled flags, options after the script (glibc's getopt permutes)
    facts = pbs_requeue.parse_show(qstat_json(["-lselect=1", "-Vz", "job.sh", "-N", "a'b"], "a'b"))
    assert facts.why == "" and facts.submit == ("-l", "select=1", "-V", "-z", "-N", "a'b")
    # output paths as qsub records them: absolute, with the submission host
    facts = pbs_requeue.parse_show(qstat_json(["-o", "logs/run.out", "-e", "/scratch/e/", "-j", "oe", "job.sh"],
                                              "job.sh", Output_Path="login1:/home/alice/proj/logs/run.out",
                                              Error_Path="login1:/scratch/e/4242.pbs-server.ER"))
    assert facts.why == "" and facts.submit == ("-o", "logs/run.out", "-e", "/scratch/e/", "-j", "oe")


def test_quotes_ampersands_and_v_lists_come_back_whole():
    argv = ["-N", 'x"y&<z>', "-v", "A=1,B=x\\,y,C", "-v", "D=it's", "job.sh"]
    doc = qstat_json(argv, 'x"y&<z>', variables=[("A", "1"), ("B", "x,y"), ("C", "/from/env"), ("D", "it's")])
    facts = pbs_requeue.parse_show(doc)
    assert facts.why == "", facts.why
    assert facts.submit == ("-N", 'x"y&<z>', "-v", "A=1,B=x\\,y,C", "-v", "D=it's")


@pytest.mark.parametrize("argv,name,variables,attrs", [
    (["-N", "my job", "job.sh"], "my job", (), {}),  # -N's value split: `job` looks like a second operand
    (["-v", "A=x y", "job.sh"], "job.sh", [("A", "x y")], {}),
    (["-v", "A=x y"], "STDIN", [("A", "x y")], {}),  # a script on stdin: `y` looks like the script
    (["-N", "run", "-o", "/home/alice/my out.txt"], "run", (),
     {"Output_Path": "login1:/home/alice/my out.txt"}),
    (["-A", "a b", "job.sh"], "job.sh", (), {"Account_Name": "a b"}),
    (["-l", "select=1", "--", "/bin/sleep", "10"], "sleep", (), {}),  # an executable, no script
])
def test_a_word_holding_a_space_makes_it_ambiguous(argv, name, variables, attrs):
    facts = pbs_requeue.parse_show(qstat_json(argv, name, variables, **attrs))
    assert facts.submit == () and facts.why, facts.submit
    assert "ambiguous" in facts.why or "program" in facts.why


def test_no_submit_arguments_is_a_script_on_stdin_with_no_flags():
    facts = pbs_requeue.parse_show(qstat_json([], "STDIN"))
    assert (facts.submit, facts.why, facts.state, facts.restarts) == ((), "", "R", 0)


def test_qstat_json_that_does_not_parse_gives_no_flags():
    doc = qstat_json(["-l", "select=1", "job.sh"], "job.sh").replace('"job.sh",', '"job"sh",', 1)
    assert '"job"sh"' in doc
    facts = pbs_requeue.parse_show(doc)
    assert facts.submit == () and "does not parse" in facts.why and facts.state == "R"


def pbs_home(tmp_path, mode=0o755):
    home = tmp_path / "pbs"
    (home / "mom_priv" / "jobs").mkdir(parents=True)
    for d in (home, home / "mom_priv", home / "mom_priv" / "jobs"):
        d.chmod(mode)
    return home


def test_the_script_is_read_from_the_mother_superiors_copy(tmp_path):
    home = pbs_home(tmp_path)
    sc = home / "mom_priv" / "jobs" / f"{JOBID}.SC"
    sc.write_bytes(b"#!/bin/sh\n#PBS -l select=1\nexec jobenv launch --requeue -- train\n")
    sc.chmod(0o700)
    assert pbs_requeue.script(JOBID, {"PBS_HOME": str(home)}) == (sc.read_bytes(), "")
    conf = tmp_path / "pbs.conf"
    conf.write_text(f"PBS_EXEC=/opt/pbs\nPBS_HOME={home}\n")
    assert pbs_requeue.script(JOBID, {"PBS_CONF_FILE": str(conf)})[0] == sc.read_bytes()
    data, why = pbs_requeue.script("4243.pbs-server", {"PBS_HOME": str(home)})
    assert data is None and "cannot be read" in why
    for bad in ("../x", "", ".hidden"):
        assert pbs_requeue.script(bad, {"PBS_HOME": str(home)})[0] is None


def test_a_copy_others_could_write_is_not_read(tmp_path, other_user):
    home = pbs_home(tmp_path)
    jobs = home / "mom_priv" / "jobs"
    sc = jobs / f"{JOBID}.SC"
    sc.write_text("#!/bin/sh\ntrue\n")
    sc.chmod(0o766)
    data, why = pbs_requeue.script(JOBID, {"PBS_HOME": str(home)})
    assert data is None and "alone" in why
    sc.chmod(0o700)
    os.chown(sc, other_user.uid, other_user.gid)  # another user's file where PBS keeps the script
    data, why = pbs_requeue.script(JOBID, {"PBS_HOME": str(home)})
    assert data is None and "alone" in why
    os.chown(sc, 0, 0)
    jobs.chmod(0o777)  # a directory anyone could put a file in
    data, why = pbs_requeue.script(JOBID, {"PBS_HOME": str(home)})
    assert data is None and "writable by others" in why
    jobs.chmod(0o755)
    sc.unlink()
    os.symlink("/etc/passwd", sc)
    assert pbs_requeue.script(JOBID, {"PBS_HOME": str(home)})[0] is None


def test_split_arguments_is_qsubs_getopt():
    assert pbs_requeue.split_arguments("-I -l select=1 -X") == ([("I", ""), ("l", "select=1"), ("X", "")], [], "")
    assert pbs_requeue.split_arguments("-l")[2] == "-l has no value"
    assert pbs_requeue.split_arguments("-Y job.sh")[2] == "-Y is not a qsub option"
    assert pbs_requeue.split_arguments("")[0:2] == ([], [])
    assert "two spaces" in pbs_requeue.split_arguments("-N a  b")[2]  # not what qstat prints: no guess
    assert pbs_qstat.AMBIGUOUS not in pbs_qstat.jobs(qstat_json(["job.sh"], "job.sh"))[JOBID]


def test_resubmission_passes_its_count_by_qsubs_last_v():
    """qsub passes no environment and keeps only its last -v (openpbs qsub.c): the count
    joins the command line's -v, replacing an earlier count, escapes kept."""
    def facts(args: str, variables: dict) -> object:
        return pbs_requeue.parse_show(json.dumps({"Jobs": {"7.pbs1": {
            "job_state": "R", "Submit_arguments": args,
            "Variable_List": {"PBS_O_WORKDIR": "/home/alice", "PBS_O_HOME": "/home/alice", **variables}}}}))

    add = {"JOBENV_RESUBMITS": "2"}
    plain = facts("-l select=1 job.sh", {})
    assert pbs_requeue.pass_vars(plain, add) == (("-l", "select=1", "-v", "JOBENV_RESUBMITS=2"), "")
    given = facts("-v A=1,B=x\\,y,JOBENV_RESUBMITS=1 -q debug job.sh", {"A": 1, "B": "x,y", "JOBENV_RESUBMITS": 1})
    assert given.why == "" and pbs_requeue.pass_vars(given, add) == (
        ("-v", "A=1,B=x\\,y,JOBENV_RESUBMITS=2", "-q", "debug"), "")
    # variables from the script's own `#PBS -v`: a command-line -v would drop them, so none is added
    directive = facts("-q debug job.sh", {"FROM_SCRIPT": "1"})
    flags, why = pbs_requeue.pass_vars(directive, add)
    assert flags == ("-q", "debug") and "FROM_SCRIPT" in why and "#PBS -v" in why
    assert pbs_requeue.pass_vars(facts("-V job.sh", {"HOME": "/x"}), add) == (("-V", "-v", "JOBENV_RESUBMITS=2"), "")


def test_substate_is_read_whole_and_trusted_only_as_a_number():
    base = {"job_state": "R", "Variable_List": {"PBS_O_WORKDIR": "/w"}}
    for value, seen in ((60, 60), (41, 41), ("60", None), (True, None), (-1, None)):
        out = json.dumps({"Jobs": {"7.pbs1": {**base, "substate": value}}})
        assert pbs_requeue.parse_show(out).substate == seen, value
    # the line reader (JSON PBS printed unescaped) takes it too
    broken = '{"Jobs":{\n"7.pbs1":{\n"Job_Name":"a"b",\n"job_state":"R",\n"substate":60,\n"run_count":2\n}}}'
    facts = pbs_requeue.parse_show(broken)
    assert (facts.state, facts.substate, facts.restarts) == ("R", 60, 1) and facts.why
