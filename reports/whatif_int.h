/*
 * whatif_int: what whatif_conf.c hands to the replay (whatif.c): NEW.ini's
 * configuration and, per rule, what of it the record lets the replay
 * work out again. Internal to the what-if files.
 */
#ifndef RLG_REPORT_WHATIF_INT_H
#define RLG_REPORT_WHATIF_INT_H

#include "conf.h"

struct whatif_conf {
	struct conf	*c;
	/* per rule of c, in file order */
	unsigned char	*in_audit;	/* the databases know its name */
	unsigned char	*match_kept;	/* its match needs path, method only */
	unsigned char	*key_kept;	/* its key needs ip, path, method only */
};

#endif
