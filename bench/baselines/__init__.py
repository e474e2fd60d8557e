"""Small, faithful re-creations of the seed design (for comparison only; never imported by
teamd): a fresh interpreter per teammate polling its inbox and the board once a second
(`seed_member`), the `O_CREAT|O_EXCL` lock file with its fall-through write after 50 tries
and the read-then-clear inbox (`seed_inbox`), and scan-then-write task claims (`seed_board`).
"""
