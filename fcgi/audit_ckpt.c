/*
 * audit_ckpt: copying the WAL back into the database (a checkpoint). The
 * checkpointer thread does it on a connection of its own when the writer
 * asks (every AUDIT_CHECKPOINT_PAGES): it is work the file needs sooner or
 * later, not work a row waits for. The writer does it itself when the
 * checkpointer is missing or behind, when space is low, after a full disk,
 * and for an inline handle. Not the writes themselves (audit_db.c).
 */
#include <sys/statvfs.h>
#include <pthread.h>
#include <string.h>

#include <sqlite3.h>

#include "audit_int.h"
#include "log.h"

/*
 * A PASSIVE checkpoint of db: it never waits for readers or for the other
 * checkpointer, and a later one finishes what it left. rc is SQLITE_OK, or
 * why db could not be opened. A failure is said once, until one succeeds:
 * the rows are safe in the WAL, only the WAL grows. The checkpointer and
 * the writer's fallback each have a flag of their own: the fallback's
 * success does not end the checkpointer's failure, nor the other way round.
 */
static void
checkpoint(struct audit *a, const char *file, sqlite3 *db, int rc,
    int by_writer)
{
	int *failing = by_writer ? &a->writer_ckpt_failing : &a->ckpt_failing;
	char why[512];

	/* Inline (CGI): the next process rebuilds the WAL's index from the
	 * file, as if nothing were copied yet; only an empty file is short
	 * to read. */
	if (rc == SQLITE_OK)
		rc = sqlite3_wal_checkpoint_v2(db, NULL, a->inline_mode ?
		    SQLITE_CHECKPOINT_TRUNCATE : SQLITE_CHECKPOINT_PASSIVE,
		    NULL, NULL);
	if (rc == SQLITE_OK || rc == SQLITE_BUSY) {
		if (*failing)
			log_info("audit: %s: %s checkpoints again", file,
			    by_writer ? "the writer" : "the checkpointer");
		*failing = 0;
		return;
	}
	if (!*failing) {
		audit_db_err(db, rc, why, sizeof(why));
		if (by_writer)
			log_warn("audit: %s: checkpoint failed: %s; the WAL "
			    "grows until one succeeds", file, why);
		else	/* 4 KiB pages, 250 a megabyte */
			log_warn("audit: %s: checkpoint failed: %s; the writer "
			    "checkpoints when the WAL reaches %d MB", file,
			    why, AUDIT_CHECKPOINT_MAX / 250);
	}
	*failing = 1;
}

/*
 * The checkpointer: on its own connection, opened for each checkpoint (so
 * a database the writer has replaced is the one it checkpoints, and one
 * that is gone is not recreated).
 */
void *
audit_ckpt_main(void *arg)
{
	struct audit *a = arg;
	char file[PATH_MAX];
	sqlite3 *db;
	int rc;

	pthread_setname_np(pthread_self(), "audit-ckpt");
	pthread_mutex_lock(&a->mu);
	for (;;) {
		while (!a->ckpt_wanted && !a->closing)
			pthread_cond_wait(&a->ckpt, &a->mu);
		if (a->closing)
			break;
		a->ckpt_wanted = 0;
		/* The writer may move to the next dated file meanwhile. */
		memcpy(file, a->path, sizeof(file));
		pthread_mutex_unlock(&a->mu);
		/* A connection knows the file is in WAL mode only once it
		 * has read it: before that a checkpoint does nothing. */
		db = NULL;
		if ((rc = sqlite3_open_v2(file, &db, SQLITE_OPEN_READWRITE |
		    SQLITE_OPEN_NOMUTEX, NULL)) == SQLITE_OK) {
			audit_db_keep_wal(db);
			rc = sqlite3_exec(db, "SELECT 1 FROM sqlite_schema "
			    "LIMIT 1", NULL, NULL, NULL);
		}
		checkpoint(a, file, db, rc, 0);
		sqlite3_close(db);
		pthread_mutex_lock(&a->mu);
	}
	pthread_mutex_unlock(&a->mu);
	return NULL;
}

/*
 * Is the free space on the database's file system less than twice what
 * the WAL holds? A checkpoint copies the WAL's pages into the database
 * file, which may need that much room: past that point the WAL could fill
 * the disk and no checkpoint could ever give its space back. So on a
 * small or filling disk the writer checkpoints at once, whatever the
 * WAL's size.
 */
static int
low_on_space(struct audit *a)
{
	struct statvfs fs;

	if (a->wal_frames == 0 || statvfs(a->path, &fs) == -1)
		return 0;
	return (long long)fs.f_bavail * (long long)fs.f_frsize <
	    2LL * a->wal_frames * (4096 + 24);
}

void
audit_ckpt_after_commit(struct audit *a)
{
	/* Once the WAL is checkpointed, the next commit starts it again
	 * from its beginning, and wal_frames falls. */
	if (a->wal_frames >= AUDIT_CHECKPOINT_MAX || (!a->ckpt_started &&
	    a->wal_frames >= (a->inline_mode ? AUDIT_INLINE_WAL_PAGES :
	    AUDIT_CHECKPOINT_PAGES)) || low_on_space(a))
		checkpoint(a, a->path, a->db, SQLITE_OK, 1);
	else if (a->wal_frames >= AUDIT_CHECKPOINT_PAGES) {
		pthread_mutex_lock(&a->mu);
		a->ckpt_wanted = 1;
		pthread_cond_signal(&a->ckpt);
		pthread_mutex_unlock(&a->mu);
	}
}

void
audit_ckpt_truncate(struct audit *a)
{
	/*
	 * After a full disk: the WAL has taken the space, and a checkpoint
	 * is what gives it back (it needs room in the database file for
	 * the pages it copies, which freeing space provides).
	 */
	if (a->truncate_wal && sqlite3_wal_checkpoint_v2(a->db, NULL,
	    SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL) == SQLITE_OK) {
		log_info("audit: %s: the WAL is checkpointed and truncated",
		    a->path);
		a->truncate_wal = 0;
	}
}
