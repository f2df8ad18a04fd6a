/** What every /api-keys operation declares alike (src/api-keys/routes/). */
export const common = { tags: ["API keys"], credential: "account" as const };
