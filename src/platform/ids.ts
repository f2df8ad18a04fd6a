/** A new id with its type prefix (`prd_`, `whk_`, `evt_`): 128 random bits as 32 hex characters. */
export const newId = (prefix: string) => `${prefix}_${crypto.randomUUID().replaceAll("-", "")}`;
